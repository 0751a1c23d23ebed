//! The continuous-batching model against a discrete-event simulation of the scheduler it
//! describes: Poisson arrivals, at most S resident sequences, each iteration reading the prompts
//! of every request admitted since the last and one token of every other resident sequence, and
//! lasting t₀ + d·N + p·P. Seeded and deterministic.

use model::plan::endpoint::Step;
use model::plan::llm::batching::itl_share_at_most;
use model::plan::llm::fit::{LlmCalibration, LlmCheck, LlmPrediction, LlmStep};
use model::plan::llm::simulate::{Simulated, bands, sampling, simulate};
use model::plan::llm::{Engine, Load, predict};
use model::plan::rng::Rng;
use model::units::Seconds;
use model::wire::run::Stats;

/// A predicted quantile agrees when it is within `tolerance` of the simulated one, or when it
/// lies between the simulated quantiles 2.5 percentage points either side: an ITL distribution
/// is two-valued (plain gaps and gaps that read a prompt), so near the rank where one turns into
/// the other a value error says little (−76 % for a p99 that is the simulation's p97.7, one
/// case below) and a rank error says what is off.
fn agrees(values: &[f64], q: f64, predicted: f64, tolerance: f64) -> bool {
    let simulated = Simulated::quantile(values, q);
    // Between the simulated quantiles either side (the largest value at most: a prediction above
    // every simulated one is not within any points of rank).
    let (low, high) = (Simulated::quantile(values, q - 0.025), Simulated::quantile(values, (q + 0.025).min(1.0)));
    ((predicted - simulated) / simulated).abs() <= tolerance || (low..=high).contains(&predicted)
}

#[test]
fn ttft_and_itl_percentiles_agree_with_the_simulated_scheduler() {
    let engines = [
        // A GPU: the weights' read dominates an iteration; prompts are cheap per token.
        Engine { fixed: Seconds(0.012), per_sequence: Seconds(0.0002), per_prompt_token: Seconds(0.00005), slots: 64 },
        // A CPU: every sequence and prompt token costs about as much as the fixed part.
        Engine { fixed: Seconds(0.002), per_sequence: Seconds(0.002), per_prompt_token: Seconds(0.0004), slots: 8 },
        Engine { fixed: Seconds(0.004), per_sequence: Seconds(0.001), per_prompt_token: Seconds(0.0001), slots: 16 },
    ];
    let (mut report, mut failures, mut outside) = (Vec::new(), Vec::new(), 0);
    for engine in engines {
        for (input, input_cv, output) in [(100.0, 0.0, 32.0), (400.0, 0.0, 128.0), (400.0, 1.0, 128.0)] {
            let capacity = engine.capacity(input, output);
            for share in [0.1, 0.3, 0.5, 0.7] {
                let load = Load { rate: share * capacity, input_tokens: input, input_cv, output_tokens: output };
                let model = predict(&engine, &load).unwrap().unwrap();
                let sim = simulate(&engine, &load, 20_000, 2_000, &mut Rng::seeded(7));
                let validated = model.validated;
                let checks = [
                    ("ttft p50", &sim.ttft, 0.5, model.ttft_p50.0),
                    ("ttft p99", &sim.ttft, 0.99, model.ttft_p99.0),
                    ("itl p50", &sim.itl, 0.5, model.itl_p50.0),
                    ("itl p99", &sim.itl, 0.99, model.itl_p99.0),
                ];
                for (name, values, q, predicted) in checks {
                    let simulated = Simulated::quantile(values, q);
                    let line = format!(
                        "S {:>2} I {input:>3} (cv {input_cv}) O {output:>3} at {share:.1} of capacity (L {:.1}): {name} model {predicted:.4} sim {simulated:.4} ({:+.0} %, rank {:.3})",
                        engine.slots,
                        model.mean_resident,
                        (predicted - simulated) / simulated * 100.0,
                        Simulated::rank(values, predicted),
                    );
                    if !validated {
                        outside += 1;
                    } else if !agrees(values, q, predicted, 0.25) {
                        failures.push(line.clone());
                    }
                    report.push(format!("{}{line}", if validated { "" } else { "(outside) " }));
                }
                // Where a prompt's reading stands out of the plain gaps (half a mean prompt is longer
                // than the slowest plain gap, so the gaps over it are those holding a prompt), the
                // share of gaps that hold one: what decides on
                // which side of the jump an ITL p99 lands. Counted per iteration as Poisson(λτ),
                // it was 30–35 % short at 70 % of capacity (0.0151 against 0.0217 for I 400).
                let prompt = engine.per_prompt_token.0 * input;
                let slowest = engine.fixed.0 + engine.per_sequence.0 * f64::from(engine.slots);
                if validated && prompt > 2.0 * slowest {
                    let at = prompt / 2.0;
                    let model = 1.0 - itl_share_at_most(&engine, &load, at).unwrap().unwrap();
                    let simulated = 1.0 - Simulated::rank(&sim.itl, at);
                    let line = format!(
                        "S {:>2} I {input:>3} (cv {input_cv}) O {output:>3} at {share:.1} of capacity: gaps over {:.0} ms model {model:.4} sim {simulated:.4} ({:+.0} %)",
                        engine.slots,
                        at * 1e3,
                        (model - simulated) / simulated * 100.0,
                    );
                    if !(simulated > 0.0 && ((model - simulated) / simulated).abs() <= 0.25) {
                        failures.push(line.clone());
                    }
                    report.push(line);
                }
            }
        }
    }
    println!("{}", report.join("\n"));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(outside * 2 < report.len(), "most cases must be inside the validated range: {outside} of {}", report.len());
}

/// The LLM page's default GPU-like engine (6 ms an iteration, 30,000 prompt tokens a second,
/// 110 slots) with long prompts, where reading one outlasts a decode iteration many times over
/// and, under load, prompt iterations come in runs (`model/examples/llm_vs_scheduler.rs`). Before
/// the model followed those runs and the long prompts' share of the time, its TTFT p99 was
/// 20–53 % below the simulated scheduler's here, inside the range it called checked.
#[test]
fn long_prompts_on_a_gpu_give_the_schedulers_ttft_p99() {
    let engine = Engine {
        fixed: Seconds(0.006),
        per_sequence: Seconds(0.00006),
        per_prompt_token: Seconds(1.0 / 30_000.0),
        slots: 110,
    };
    let mut failures = Vec::new();
    for input in [1000.0, 4000.0] {
        let capacity = engine.capacity(input, 250.0);
        for share in [0.4, 0.55, 0.7] {
            let load = Load { rate: share * capacity, input_tokens: input, input_cv: 0.5, output_tokens: 250.0 };
            let model = predict(&engine, &load).unwrap().unwrap();
            assert!(model.validated, "{input} tokens at {share}: {model:?}");
            let sim = simulate(&engine, &load, 12_000, 1_200, &mut Rng::seeded(3));
            let simulated = Simulated::quantile(&sim.ttft, 0.99);
            let error = (model.ttft_p99.0 - simulated) / simulated;
            let line = format!(
                "I {input} at {share} of capacity: TTFT p99 model {:.4} sim {simulated:.4} ({:+.0} %)",
                model.ttft_p99.0,
                error * 100.0
            );
            println!("{line}");
            if error.abs() > 0.15 {
                failures.push(line);
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A load test of four 30-second steps on a CPU-like engine (llama.cpp's on one thread, as the
/// agent's LLM test runs it), at 9–57 % of its capacity.
fn short_run(engine: &Engine, load: &Load, window: f64) -> Vec<LlmStep> {
    let capacity = engine.capacity(load.input_tokens, load.output_tokens);
    [0.09, 0.26, 0.42, 0.57]
        .iter()
        .enumerate()
        .map(|(i, share)| {
            let rate = share * capacity;
            let requests = (rate * window).round() as u64;
            LlmStep {
                step: Step {
                    step: i as u32 + 1,
                    offered: rate,
                    achieved: rate,
                    mean: None,
                    p50: None,
                    p99: None,
                    cv: None,
                    requests,
                    error_rate: 0.0,
                    saturated: false,
                    client_limited: false,
                    in_flight: None,
                    scheduled: None,
                },
                ttft: Stats::single(0.0),
                itl: Stats::single(0.0),
                input_tokens: load.input_tokens,
                input_cv: load.input_cv,
                output_tokens: load.output_tokens,
                requests,
                tokens_per_second: None,
            }
        })
        .collect()
}

/// `engine` as if fitted on a [`short_run`] of `load`.
fn fitted_on(engine: Engine, load: Load) -> LlmCalibration {
    LlmCalibration {
        engine,
        input_tokens: load.input_tokens,
        input_cv: load.input_cv,
        output_tokens: load.output_tokens,
        base_step: 1,
        batch_step: Some(4),
    }
}

#[test]
fn a_short_steps_p99_is_noisy_and_the_noise_shrinks_with_longer_steps() {
    let engine =
        Engine { fixed: Seconds(0.0005), per_sequence: Seconds(0.003), per_prompt_token: Seconds(0.00025), slots: 8 };
    let load = Load { rate: 0.0, input_tokens: 260.0, input_cv: 0.2, output_tokens: 32.0 };
    let spread = |window: f64| {
        let steps = short_run(&engine, &load, window);
        // The engine as if fitted on the run: `sampling` needs only its calibration.
        let fitted = LlmCheck {
            calibration: fitted_on(engine, load),
            slots_from: Default::default(),
            predictions: Vec::new(),
            mape_ttft_p99: None,
            mape_itl_p99: None,
        };
        let sampling = sampling(&fitted, &steps, 50, 3);
        assert!(sampling.mape_ttft_p99.len() >= 45, "nearly every replicate can be checked");
        let q = |q: f64| sampling.ttft_p99_error(q).unwrap();
        println!("{window} s steps: mean |error| of TTFT p99 p50 {:.2}, p90 {:.2}, max {:.2}", q(0.5), q(0.9), q(1.0));
        (q(0.5), q(0.9))
    };
    let (short, long) = (spread(30.0), spread(120.0));
    // Fitted and checked on its own scheduler's output, the model is about right in the median
    // whatever the length of the steps...
    assert!(short.0 <= 0.35 && long.0 <= 0.25, "{short:?} {long:?}");
    // ...but one run in ten of 30-second steps is off by much more, from sampling alone; four
    // times the requests narrow that.
    assert!(short.1 >= 0.4, "{short:?}");
    assert!(long.1 < 0.85 * short.1, "{short:?} {long:?}");
}

#[test]
fn a_steps_bands_hold_its_own_schedulers_p99s_and_a_low_rates_itl_band_spans_the_jump() {
    // As fitted on llama.cpp in the agent's LLM test: prompts of 150 tokens take 59 ms to read,
    // a token of a few sequences 3-6 ms.
    let engine =
        Engine { fixed: Seconds(0.0016), per_sequence: Seconds(0.0013), per_prompt_token: Seconds(0.00039), slots: 8 };
    let load = Load { rate: 0.0, input_tokens: 150.0, input_cv: 0.3, output_tokens: 32.0 };
    let steps = short_run(&engine, &load, 30.0);
    let calibration = fitted_on(engine, load);
    let prediction = |s: &LlmStep| LlmPrediction {
        step: s.step.step,
        offered: s.step.offered,
        busy: None,
        ttft_p99: None,
        itl_p99: None,
        ttft_p50: None,
        itl_p50: None,
        measured_ttft_p99: 0.0,
        measured_itl_p99: 0.0,
        measured_ttft_p50: 0.0,
        measured_itl_p50: 0.0,
        error_ttft_p99: None,
        error_itl_p99: None,
        itl_rank: None,
        counted: s.step.step != 1,
    };
    let fitted = LlmCheck {
        calibration,
        slots_from: Default::default(),
        predictions: steps.iter().map(prediction).collect(),
        mape_ttft_p99: None,
        mape_itl_p99: None,
    };
    let got = bands(&fitted, &steps);
    assert_eq!(got.iter().map(|b| b.step).collect::<Vec<_>>(), [2, 3, 4], "a band per counted step: {got:?}");
    assert!(got.iter().all(|b| b.ttft.low <= b.ttft.high && b.itl.low <= b.itl.high), "{got:?}");
    assert_eq!(got, bands(&fitted, &steps), "seeded: the same run gets the same bands");

    // Steps of the scheduler itself, measured afresh, fall inside their bands about 90 times in 100.
    let mut rng = Rng::seeded(7);
    let (mut inside, mut judged) = ([0u32; 2], 0u32);
    for _ in 0..40 {
        for (s, b) in steps.iter().skip(1).zip(&got) {
            let n = s.requests as usize;
            let sim = simulate(&engine, &calibration.load_at(s.step.offered), n + n / 10 + 1, n / 10 + 1, &mut rng);
            judged += 1;
            for (i, (values, band)) in [(&sim.ttft, b.ttft), (&sim.itl, b.itl)].into_iter().enumerate() {
                inside[i] += u32::from(band.side(Simulated::quantile(values, 0.99)) == "inside");
            }
        }
    }
    let share = inside.map(|n| f64::from(n) / f64::from(judged));
    println!("bands {got:?}\nshare of fresh steps inside (TTFT, ITL): {share:?}");
    assert!(share.iter().all(|s| (0.75..=0.99).contains(s)), "{share:?}");
    // At the lowest rate counted a few gaps in a hundred read another request's prompt: whether
    // the 99th percentile is a plain gap or one of those is chance, and the band spans both.
    let low = got[0].itl;
    assert!(low.high > 3.0 * low.low, "{low:?}");

    // What an agent token may upload does not hang the server that simulates it when it stores
    // the run, nor store a figure JSON cannot hold: prompt lengths that vary by 1e-200 (a gamma
    // shape of 1e400), a rate of 1e-300/s (arrivals so far apart that the simulated clock loses
    // each request's own time).
    let hostile = Load { input_cv: 1e-200, ..load };
    let hostile_fit = LlmCheck { calibration: fitted_on(engine, hostile), ..fitted.clone() };
    assert_eq!(bands(&hostile_fit, &short_run(&engine, &hostile, 30.0)).len(), 3, "lengths that do not vary");
    let mut steps = short_run(&engine, &load, 30.0);
    steps[1].step.offered = 1e-300;
    let got = bands(&fitted, &steps);
    assert_eq!(got.iter().map(|b| b.step).collect::<Vec<_>>(), [3, 4], "no band for a rate beyond the clock");
}
