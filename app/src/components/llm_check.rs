//! The run page's section for a load test of an OpenAI-compatible server: the engine fitted
//! on it, TTFT and ITL distributions per step, output tokens per second against the rate, and
//! each step's measurement beside the continuous-batching model's prediction.

use leptos::prelude::*;
use model::format::seconds;
use model::plan::endpoint::Band;
use model::plan::llm::Engine;
use model::plan::llm::fit::{LlmCheck, LlmStep, SlotsFrom};
use model::plan::llm::simulate::LlmBand;

use crate::components::charts::{LineChart, Series, line_chart};
use crate::pages::run::percent;

/// Each step's distribution of `pick` (TTFT or ITL) as the cumulative fraction at its
/// measured percentiles.
fn cdf(steps: &[LlmStep], title: &str, pick: fn(&LlmStep) -> model::Stats) -> String {
    let mut chart = LineChart::new(title, "seconds (log)", "fraction of requests");
    chart.x_log = true;
    chart.x_format = seconds;
    chart.y_format = |v| format!("{:.0} %", v * 100.0);
    for s in steps {
        let q = pick(s);
        let points = vec![(q.p50, 0.5), (q.p90, 0.9), (q.p99, 0.99), (q.p999, 0.999)];
        chart.series.push(Series::new(format!("{:.2}/s", s.step.offered), points));
    }
    line_chart(&chart)
}

/// Output tokens per second against the offered rate: measured, and λ × O.
fn tokens_chart(steps: &[LlmStep], check: &LlmCheck) -> String {
    let mut chart = LineChart::new("Output tokens per second vs request rate", "requests / s offered", "tokens / s");
    chart.x_format = |v| format!("{v:.2}");
    chart.y_format = |v| format!("{v:.0}");
    chart.y_from_zero = true;
    let measured: Vec<(f64, f64)> = steps.iter().filter_map(|s| Some((s.step.offered, s.tokens_per_second?))).collect();
    let o = check.calibration.output_tokens;
    chart.series.push(Series::new("measured", measured));
    chart.series.push(Series::new(
        "rate × output tokens",
        steps.iter().map(|s| (s.step.offered, s.step.offered * o)).collect(),
    ));
    line_chart(&chart)
}

/// An engine's fixed cost of an iteration in words: `2.10 ms fixed`, or `nothing fixed` where
/// the fit put the whole iteration on its sequences (a batched step's gaps as long as its
/// sequences decoded one by one, or longer; the fit's bisection leaves a remainder of
/// femtoseconds there, which reads as "0.00 ns").
pub fn fixed_part(e: &Engine) -> String {
    if negligible(e.fixed.0, e) { "nothing fixed".into() } else { format!("{} fixed", seconds(e.fixed.0)) }
}

/// An engine's cost of each sequence decoded in words: `1.05 ms per sequence`, or `nothing per
/// sequence` where the fit put the whole iteration in its fixed part (a mock server's set gaps).
pub fn per_sequence_part(e: &Engine) -> String {
    if negligible(e.per_sequence.0, e) {
        "nothing per sequence".into()
    } else {
        format!("{} per sequence", seconds(e.per_sequence.0))
    }
}

/// Whether one of an engine's two costs of an iteration is a remainder of the fit's bisection
/// beside the other (at most a millionth of their sum), not a cost.
fn negligible(part: f64, e: &Engine) -> bool {
    part <= 1e-6 * (e.fixed.0 + e.per_sequence.0)
}

/// `check` is the fit the server made when it stored the run ([`model::wire::measured::LlmDigest`]).
#[component]
pub fn LlmCheckView(steps: Vec<LlmStep>, check: Option<LlmCheck>, bands: Vec<LlmBand>) -> impl IntoView {
    let Some(check) = check else {
        return view! { <p class="error" data-out="llm-check">"No engine was fitted on this load test: it is not of an OpenAI-compatible server, or no step had a successful request the client could trust, or its figures did not give finite costs."</p> }.into_any();
    };
    let c = check.calibration;
    let e = c.engine;
    let batch = match c.batch_step {
        Some(step) if negligible(e.fixed.0, &e) => format!(
            "{} per sequence decoded (from step {step}, whose batches took as long as their sequences one by one, or longer)",
            seconds(e.per_sequence.0)
        ),
        Some(step) if negligible(e.per_sequence.0, &e) => format!(
            "nothing per sequence decoded (from step {step}, whose batches took no longer than one sequence alone)"
        ),
        Some(step) => format!("{} per sequence decoded (from step {step})", seconds(e.per_sequence.0)),
        None => "no step batched enough sequences to measure the cost of one more: taken as 0".into(),
    };
    let summary = format!(
        "Fitted from step {}: an iteration costs {}, {}; prompts read at {:.0} tokens/s. Requests carried {:.0} prompt and {:.0} output tokens on average. {}",
        c.base_step,
        fixed_part(&e),
        batch,
        1.0 / e.per_prompt_token.0.max(1e-12),
        c.input_tokens,
        c.output_tokens,
        match check.slots_from {
            SlotsFrom::Assumed => format!(
                "{} slots, {} (the OpenAI API has no field for them): give them to the agent with --slots N.",
                e.slots,
                check.slots_from.words()
            ),
            from => format!("{} slots, {}.", e.slots, from.words()),
        },
    );
    let counted = check.predictions.iter().filter(|p| p.counted).count();
    // A p99 of a few hundred requests is itself unsure: say on how few the error rests.
    let fewest = check
        .predictions
        .iter()
        .filter(|p| p.counted)
        .filter_map(|p| steps.iter().find(|s| s.step.step == p.step))
        .map(|s| s.requests)
        .min()
        .unwrap_or(0);
    let burst = if fewest < 100 {
        "so its p99 is simply its slowest request: one burst moves it by tens of per cent"
    } else {
        "and near capacity one burst moves such a p99 by tens of per cent"
    };
    let noise = if (1..1000).contains(&fewest) {
        format!(
            " The smallest of those steps counted {fewest} requests, {burst}. Part of this error can be the steps' own noise (in a simulation of the scheduler the model describes, four 30-second steps up to 57 % of a CPU server's capacity came out over 50 % off one run in ten); longer steps tell the model's error more surely."
        )
    } else {
        String::new()
    };
    let error = match (check.mape_ttft_p99, check.mape_itl_p99) {
        (Some(ttft), Some(itl)) => format!(
            "The model's TTFT p99 is off by {:.0} % and its ITL p99 by {:.0} % on average over the {counted} steps below 80 % of capacity.{noise}",
            ttft * 100.0,
            itl * 100.0
        ),
        _ => "No step besides the calibration step ran below 80 % of capacity, so the model's error is not known yet: load it at more rates.".into(),
    };
    // An ITL p99 far off in value but near the model's own 99th percentile sits where the
    // model's distribution rises steeply (gaps that read another request's prompt); the first
    // such step is named.
    let jump = check.predictions.iter().find(|p| {
        p.counted
            && p.error_itl_p99.is_some_and(|e| e.abs() > 0.25)
            && p.itl_rank.is_some_and(|r| (0.98..=0.995).contains(&r))
    });
    let jump = jump.map(|p| {
        format!(
            "At step {} the ITL p99 is off by {} yet the measured p99 is the model's {}: the model's gaps rise steeply between its p98 and p99.5 (gaps that also read another request's prompt are a few in a hundred), so the 99th percentile lands on either side of that rise by chance; the rank is the fairer test.",
            p.step,
            percent(p.error_itl_p99),
            rank(p.itl_rank)
        )
    });
    // Where each counted step's p99s would fall by chance were the server the fitted engine.
    let band = |step: u32| bands.iter().find(|b| b.step == step).copied();
    let outside = |pick: fn(&LlmBand) -> Band, measured: fn(&model::plan::llm::fit::LlmPrediction) -> f64| {
        let sides: Vec<&str> = check
            .predictions
            .iter()
            .filter(|p| p.counted)
            .filter_map(|p| Some(pick(&band(p.step)?).side(measured(p))))
            .collect();
        (sides.len(), sides.iter().filter(|&&s| s != "inside").count())
    };
    let ((judged, ttft_out), (_, itl_out)) =
        (outside(|b| b.ttft, |p| p.measured_ttft_p99), outside(|b| b.itl, |p| p.measured_itl_p99));
    let chance = (judged > 0).then(|| {
        let of = if judged == 1 { "Of the one step counted".to_string() } else { format!("Of the {judged} steps counted") };
        format!(
            "{of}, the TTFT p99 of {ttft_out} and the ITL p99 of {itl_out} lie outside the band each would fall in 90 times in 100 were the server the fitted engine, simulated in steps of their rate and size with the calibration step's prompt and output lengths (the columns by chance): inside, an error is no more than a step that long moves by chance; outside, it is the model's, its fit's, or the server's own drift between steps."
        )
    });
    let by_chance = |b: Option<Band>, measured: f64| match b {
        Some(b) => format!("{}–{}, {}", seconds(b.low), seconds(b.high), b.side(measured)),
        None => "–".into(),
    };
    let ttft_svg = cdf(&steps, "Time to first token, CDF per step", |s| s.ttft);
    let itl_svg = cdf(&steps, "Inter-token latency, CDF per step", |s| s.itl);
    let tokens_svg = tokens_chart(&steps, &check);
    let time = |v: Option<f64>| v.map(seconds).unwrap_or_else(|| "unbounded".into());
    view! {
        <section class="card" data-out="llm-check">
            <h2>"Your LLM server under load"</h2>
            <p data-out="llm-engine">{summary}</p>
            <p data-out="llm-error">{error}</p>
            {jump.map(|text| view! { <p data-out="llm-itl-jump">{text}</p> })}
            {chance.map(|text| view! { <p data-out="llm-chance">{text}</p> })}
            <div class="chart" data-chart="ttft-cdf" inner_html=ttft_svg></div>
            <div class="chart" data-chart="itl-cdf" inner_html=itl_svg></div>
            <div class="chart" data-chart="tokens" inner_html=tokens_svg></div>
            <div tabindex="0" class="table-wrap">
                <table class="stack llm-steps">
                    <thead><tr><th>"Step"</th><th>"Offered"</th><th>"TTFT p99 measured"</th><th>"TTFT p99 model"</th><th>"Error"</th><th>"TTFT p99 by chance"</th><th>"ITL p99 measured"</th><th>"ITL p99 model"</th><th>"Error"</th><th>"ITL p99 is the model's"</th><th>"ITL p99 by chance"</th><th>"Note"</th></tr></thead>
                    <tbody>
                        {check.predictions.iter().map(|p| {
                            let note = if p.step == c.base_step { "calibration step" } else if !p.counted { "not counted" } else { "" };
                            view! {
                                <tr>
                                    <td data-label="Step">{p.step}</td>
                                    <td data-label="Offered">{format!("{:.2}/s", p.offered)}</td>
                                    <td data-label="TTFT p99 measured">{seconds(p.measured_ttft_p99)}</td>
                                    <td data-label="TTFT p99 model">{time(p.ttft_p99)}</td>
                                    <td data-label="Error">{percent(p.error_ttft_p99)}</td>
                                    <td data-label="TTFT p99 by chance">{by_chance(band(p.step).map(|b| b.ttft), p.measured_ttft_p99)}</td>
                                    <td data-label="ITL p99 measured">{seconds(p.measured_itl_p99)}</td>
                                    <td data-label="ITL p99 model">{time(p.itl_p99)}</td>
                                    <td data-label="Error">{percent(p.error_itl_p99)}</td>
                                    <td data-label="ITL p99 is the model's">{rank(p.itl_rank)}</td>
                                    <td data-label="ITL p99 by chance">{by_chance(band(p.step).map(|b| b.itl), p.measured_itl_p99)}</td>
                                    <td data-label="Note">{note}</td>
                                </tr>
                            }
                        }).collect_view()}
                    </tbody>
                </table>
            </div>
        </section>
    }.into_any()
}

/// A share of the model's distribution as a percentile: `p98.7`; `–` where unknown (runs
/// stored before the rank was).
fn rank(share: Option<f64>) -> String {
    share.map_or_else(|| "–".into(), |r| format!("p{:.1}", r * 100.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::units::Seconds;

    #[test]
    fn an_engines_costs_read_nothing_where_the_fit_left_a_remainder() {
        let e = |fixed: f64, per_sequence: f64| Engine {
            fixed: Seconds(fixed),
            per_sequence: Seconds(per_sequence),
            per_prompt_token: Seconds(0.0003),
            slots: 8,
        };
        assert_eq!(
            (fixed_part(&e(0.0, 0.00105)), per_sequence_part(&e(0.0, 0.00105))),
            ("nothing fixed".into(), "1.05 ms per sequence".into())
        );
        assert_eq!(per_sequence_part(&e(0.005, 1e-12)), "nothing per sequence");
        assert_eq!(fixed_part(&e(0.005, 1e-12)), "5.00 ms fixed");
    }
}
