//! The three decoders of untrusted input (JSON ingest, protobuf ingest, the price catalog CSV)
//! fed arbitrary bytes and mutations of valid input: the bounded, stable-toolchain run of what
//! the fuzz targets in `fuzz/` do for as long as one lets them. The invariants are in
//! `oracle.rs`, shared with those targets; the seeds are the fuzzers' seed corpus.

mod oracle;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::LazyLock;

use headroom_server::ingest::decode_json;
use headroom_server::prices;
use model::{Floor, GpuInfo, Measurement, MeasurementStatus, NodeInfo, RunUpload, Stats, Suite, Unit};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::FileFailurePersistence;

/// Arbitrary bytes: most are refused at the first byte, so many cases are cheap.
const BYTES_CASES: u32 = 2000;
/// Mutations of a valid input: each case decodes one input of a few hundred bytes or more.
const MUTATION_CASES: u32 = 2000;
/// Generated runs through both doors.
const RUN_CASES: u32 = 1000;

/// `cases`, or `PROPTEST_CASES` for a longer run. A failure is kept (by its seed) in
/// `decoders/proptest-regressions.txt` and tried first on every later run; commit that file
/// with the fix.
fn config(cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(cases);
    let persistence = FileFailurePersistence::Direct("tests/decoders/proptest-regressions.txt");
    ProptestConfig { cases, failure_persistence: Some(Box::new(persistence)), ..ProptestConfig::default() }
}

/// A valid run that uses every field: the JSON and protobuf seeds.
fn sample_run() -> RunUpload {
    let stats = Stats {
        samples: 50,
        mean: 1.2e10,
        p50: 1.1e10,
        p90: 1.3e10,
        p99: 1.4e10,
        p999: 1.45e10,
        ci95_low: 1.15e10,
        ci95_high: 1.25e10,
    };
    RunUpload {
        run_id: uuid::Uuid::from_u128(0x0192_7c3e_5a4b_7000_8000_0000_0000_0001),
        agent_version: "0.1.0".into(),
        started_at_ms: 1_796_000_000_000,
        finished_at_ms: 1_796_000_005_000,
        node: NodeInfo {
            node_id: "4c4c4544-0042".into(),
            hostname: "gpu-node-1".into(),
            cpu_model: "AMD EPYC 7R13".into(),
            cpu_cores: 48,
            memory_bytes: 192 << 30,
            kernel: "6.1.0-18-cloud-amd64".into(),
            instance_type: Some("g5.12xlarge".into()),
            hourly_usd: Some(5.672),
            gpus: vec![GpuInfo {
                name: "NVIDIA A10G".into(),
                memory_bytes: 24 << 30,
                driver_version: Some("550.54.15".into()),
                cuda_version: Some("12.4".into()),
                pcie_generation: Some(4),
                pcie_width: Some(16),
            }],
        },
        measurements: vec![
            Measurement {
                suite: Suite::Transfer,
                case: "h2d_pinned".into(),
                parameters: BTreeMap::from([("bytes".into(), "67108864".into()), ("gpu".into(), "0".into())]),
                unit: Unit::BytesPerSecond,
                status: MeasurementStatus::Ok,
                reason: None,
                stats: Some(stats),
                floor: Some(Floor { name: "pcie_theoretical".into(), value: 3.2e10 }),
                histogram: None,
            },
            Measurement {
                suite: Suite::Gemm,
                case: "fp8".into(),
                parameters: BTreeMap::new(),
                unit: Unit::FlopPerSecond,
                status: MeasurementStatus::Skipped,
                reason: Some("the GPU has no FP8 tensor cores".into()),
                stats: None,
                floor: None,
                histogram: None,
            },
        ],
    }
}

/// The seed corpus is what [`sample_run`] and the shipped catalog encode to, so it cannot rot:
/// `current` says whether the stored seed still is that. `HEADROOM_WRITE_SEEDS=1` writes `fresh`.
fn seed(target: &str, file: &str, fresh: Vec<u8>, current: impl Fn(&[u8]) -> bool) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus").join(target).join(file);
    if std::env::var_os("HEADROOM_WRITE_SEEDS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &fresh).unwrap();
    }
    let stored = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(current(&stored), "{} is stale: run with HEADROOM_WRITE_SEEDS=1", path.display());
    stored
}

static JSON_SEED: LazyLock<Vec<u8>> = LazyLock::new(|| {
    let mut json = serde_json::to_vec_pretty(&sample_run()).unwrap();
    json.push(b'\n');
    seed("ingest_json", "run.json", json.clone(), |stored| stored == json)
});

/// Compared decoded: prost writes a map in `HashMap` order, which differs from run to run.
static PROTOBUF_SEED: LazyLock<Vec<u8>> = LazyLock::new(|| {
    let current = |stored: &[u8]| proto::decode_upload(stored).ok() == Some(sample_run());
    seed("ingest_protobuf", "run.pb", proto::encode_upload(&sample_run()), current)
});

static CSV_SEED: LazyLock<Vec<u8>> = LazyLock::new(|| {
    let catalog = prices::DEFAULT_CATALOG.as_bytes();
    seed("price_csv", "price-catalog.csv", catalog.to_vec(), |stored| stored == catalog)
});

#[test]
fn the_seeds_are_accepted() {
    assert_eq!(decode_json(&JSON_SEED).unwrap(), sample_run());
    assert_eq!(proto::decode_upload(&PROTOBUF_SEED).unwrap(), sample_run());
    assert!(prices::parse(std::str::from_utf8(&CSV_SEED).unwrap()).is_ok());
    oracle::json(&JSON_SEED);
    oracle::protobuf(&PROTOBUF_SEED);
    oracle::price_csv(&CSV_SEED);
}

/// Found by `both_doors_take_exactly_the_valid_runs`: without serde_json's `float_roundtrip`,
/// the server read some numbers an agent wrote as the next f64 over.
#[test]
fn numbers_read_back_exactly() {
    let mut run = sample_run();
    run.node.hourly_usd = Some(1.1560416684909663e69);
    run.measurements[0].stats.as_mut().unwrap().mean = 2.2136092888451462e29;
    assert_eq!(decode_json(&serde_json::to_vec(&run).unwrap()).unwrap(), run);
}

/// Bytes with meaning to one of the formats, for insertion: JSON tokens and values at the edges
/// of their types, protobuf varints and keys, CSV quoting and cell prefixes.
const DICTIONARY: &[&[u8]] = &[
    b"\"",
    b"\\",
    b"\\u0000",
    b"\\ud800",
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"null",
    b"true",
    b"-",
    b"-0",
    b"0",
    b"1e400",
    b"-1e400",
    b"1e-400",
    b"18446744073709551616",
    b"-9223372036854775809",
    b"0.30000000000000004",
    b"\"x\":1,",
    b"\"run_id\":",
    b"\"stats\":null,",
    b"\xff",
    b"\xc3",
    b"\xe2\x80\xae",
    b"\x00",
    b"\x80",
    b"\xff\xff\xff\xff\x0f",
    b"\x32\x00",
    b"\x2a\x00",
    b"\x4a\x00",
    b"\x1a\x04\x0a\x00\x12\x00",
    b"\n",
    b"\r\n",
    b"'",
    b"'=",
    b"=",
    b"+",
    b"@",
    b"\t",
    b"\"\"",
    b",,",
    b"2026-02-30",
    b"0.0000001",
    b"0.0001",
    b"00",
    b"+1",
    b"NaN",
    b"inf",
];

/// One edit of an input.
#[derive(Debug, Clone)]
enum Edit {
    Flip(Index, u8),
    Set(Index, u8),
    Insert(Index, Vec<u8>),
    Delete(Index, usize),
    Truncate(Index),
    /// Copies a stretch of the input elsewhere: repeats protobuf fields (which then merge or
    /// append), JSON members and CSV rows.
    Splice {
        from: Index,
        len: usize,
        to: Index,
    },
}

fn edit() -> impl Strategy<Value = Edit> {
    let inserted = prop_oneof![
        prop::sample::select(DICTIONARY).prop_map(<[u8]>::to_vec),
        prop::collection::vec(any::<u8>(), 1..8),
    ];
    prop_oneof![
        3 => (any::<Index>(), 0..8u8).prop_map(|(at, bit)| Edit::Flip(at, bit)),
        2 => (any::<Index>(), any::<u8>()).prop_map(|(at, byte)| Edit::Set(at, byte)),
        3 => (any::<Index>(), inserted).prop_map(|(at, bytes)| Edit::Insert(at, bytes)),
        2 => (any::<Index>(), 1..16usize).prop_map(|(at, len)| Edit::Delete(at, len)),
        1 => any::<Index>().prop_map(Edit::Truncate),
        2 => (any::<Index>(), 1..200usize, any::<Index>()).prop_map(|(from, len, to)| Edit::Splice { from, len, to }),
    ]
}

fn apply(mut bytes: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    for edit in edits {
        if bytes.is_empty() {
            break;
        }
        let n = bytes.len();
        match edit {
            Edit::Flip(at, bit) => bytes[at.index(n)] ^= 1 << bit,
            Edit::Set(at, byte) => bytes[at.index(n)] = *byte,
            Edit::Insert(at, new) => {
                let at = at.index(n + 1);
                bytes.splice(at..at, new.iter().copied());
            }
            Edit::Delete(at, len) => {
                let at = at.index(n);
                bytes.drain(at..(at + len).min(n));
            }
            Edit::Truncate(at) => bytes.truncate(at.index(n)),
            Edit::Splice { from, len, to } => {
                let from = from.index(n);
                let piece = bytes[from..(from + len).min(n)].to_vec();
                let to = to.index(n + 1);
                bytes.splice(to..to, piece);
            }
        }
    }
    bytes
}

fn edits() -> impl Strategy<Value = Vec<Edit>> {
    prop::collection::vec(edit(), 1..6)
}

/// One edit of the seed run's JSON tree, which stays JSON: what a buggy or hostile agent sends.
#[derive(Debug, Clone)]
enum JsonEdit {
    Replace(Index, serde_json::Value),
    Remove(Index),
    Add(Index, String, serde_json::Value),
}

/// Values at the edges of the run's fields: numbers past their types, strings the rules refuse
/// or the enums take, the wrong shapes.
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::{Value, json};
    prop_oneof![
        prop::sample::select(vec![
            Value::Null,
            json!(true),
            json!(0),
            json!(-1),
            json!(1),
            json!(0.5),
            json!(-0.0),
            json!(1e308),
            json!(-1e308),
            json!(5e-324),
            json!(u64::MAX),
            json!(i64::MIN),
            json!(u32::MAX),
            json!(u64::from(u32::MAX) + 1),
            json!(""),
            json!(" "),
            json!("\u{0}"),
            json!("a\u{1b}[31m"),
            json!("x".repeat(257)),
            json!("é".repeat(128)),
            json!("ok"),
            json!("skipped"),
            json!("failed"),
            json!("system"),
            json!("seconds"),
            json!("ratio"),
            json!("00000000-0000-0000-0000-000000000000"),
            json!("{01927c3e-5a4b-7000-8000-000000000002}"),
            json!("urn:uuid:01927c3e-5a4b-7000-8000-000000000003"),
            json!([]),
            json!({}),
            json!([1]),
        ]),
        any::<i64>().prop_map(serde_json::Value::from),
        prop::num::f64::ANY.prop_filter("finite", |v| v.is_finite()).prop_map(serde_json::Value::from),
        ".{0,8}".prop_map(serde_json::Value::from),
    ]
}

/// Every node of `value` as a JSON pointer, the root first.
fn pointers(value: &serde_json::Value, at: String, out: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(members) => {
            for (key, member) in members {
                pointers(member, format!("{at}/{}", key.replace('~', "~0").replace('/', "~1")), out);
            }
        }
        serde_json::Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                pointers(item, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
    out.push(at);
}

/// The JSON seed with a few values replaced, members removed or unknown members added.
fn edited_json() -> impl Strategy<Value = Vec<u8>> {
    let edit = prop_oneof![
        4 => (any::<Index>(), json_value()).prop_map(|(at, value)| JsonEdit::Replace(at, value)),
        1 => any::<Index>().prop_map(JsonEdit::Remove),
        1 => (any::<Index>(), "[a-z_]{1,12}", json_value()).prop_map(|(at, key, value)| JsonEdit::Add(at, key, value)),
    ];
    prop::collection::vec(edit, 1..4).prop_map(|edits| {
        let mut run: serde_json::Value = serde_json::from_slice(&JSON_SEED).unwrap();
        for edit in edits {
            let mut all = Vec::new();
            pointers(&run, String::new(), &mut all);
            let pick = |at: &Index| all[at.index(all.len())].clone();
            match edit {
                JsonEdit::Replace(at, value) => *run.pointer_mut(&pick(&at)).unwrap() = value,
                JsonEdit::Remove(at) => {
                    let path = pick(&at);
                    if let Some((parent, key)) = path.rsplit_once('/') {
                        match run.pointer_mut(parent) {
                            Some(serde_json::Value::Object(members)) => {
                                members.remove(&key.replace("~1", "/").replace("~0", "~"));
                            }
                            Some(serde_json::Value::Array(items)) => {
                                items.remove(key.parse::<usize>().unwrap());
                            }
                            _ => {}
                        }
                    }
                }
                JsonEdit::Add(at, key, value) => match run.pointer_mut(&pick(&at)) {
                    Some(serde_json::Value::Object(members)) => {
                        members.insert(key, value);
                    }
                    Some(serde_json::Value::Array(items)) => items.push(value),
                    _ => {}
                },
            }
        }
        serde_json::to_vec(&run).unwrap()
    })
}

/// One edit of the seed catalog, cell by cell.
#[derive(Debug, Clone)]
enum CellEdit {
    Replace { line: Index, column: Index, cell: String },
    AddRow(Vec<String>),
    DeleteLine(Index),
}

/// Text that probes each column's rules: numbers at the edges, dates, quoting, spreadsheet
/// prefixes, control characters.
fn cell() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(vec![
            "", " ", "0", "1", "-1", "+1", "007", "4294967296", "1.5", "1.0001", "0.0001", "0.0000000001", "1e3", "1e9",
            "NaN", "inf", "0.000001", "0.0000001", "9223372036854.775807", "2026-02-29", "2024-02-29", "2026-+1-01",
            "2026-1-01", "1969-12-31", "on_demand", "spot", "one_year", "three_year", "'", "'=1", "'-x", "''=x", "=1+1",
            "-x", "@x", "\t", "'\t", "a\u{0}b", "a\u{1b}b", "a\"b", "a,b", "a\nb", " x ", "\u{feff}x", "us-east-1",
            "NVIDIA A10G", "aws",
        ])
        .prop_map(str::to_string),
        1 => "[ -~]{0,12}",
        1 => ".{0,6}",
    ]
}

/// The shipped catalog with a few cells replaced, rows added or lines deleted.
fn edited_catalog() -> impl Strategy<Value = String> {
    let edit = prop_oneof![
        6 => (any::<Index>(), any::<Index>(), cell())
            .prop_map(|(line, column, cell)| CellEdit::Replace { line, column, cell }),
        1 => prop::collection::vec(cell(), prices::COLUMNS.len()).prop_map(CellEdit::AddRow),
        1 => any::<Index>().prop_map(CellEdit::DeleteLine),
    ];
    prop::collection::vec(edit, 1..6).prop_map(|edits| {
        // The shipped catalog has no quoted cells, so its cells are its lines split at commas.
        let mut lines: Vec<Vec<String>> =
            prices::DEFAULT_CATALOG.lines().map(|l| l.split(',').map(str::to_string).collect()).collect();
        for edit in edits {
            match edit {
                CellEdit::Replace { line, column, cell } if lines.len() > 1 => {
                    let at = 1 + line.index(lines.len() - 1);
                    let line = &mut lines[at];
                    let at = column.index(line.len());
                    line[at] = quote(&cell);
                }
                CellEdit::AddRow(row) => lines.push(row.iter().map(|c| quote(c)).collect()),
                CellEdit::DeleteLine(line) if lines.len() > 1 => {
                    lines.remove(1 + line.index(lines.len() - 1));
                }
                _ => {}
            }
        }
        lines.iter().map(|l| l.join(",") + "\n").collect()
    })
}

/// `text` as one CSV cell.
fn quote(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) { format!("\"{}\"", text.replace('"', "\"\"")) } else { text.into() }
}

proptest! {
    #![proptest_config(config(BYTES_CASES))]

    #[test]
    fn json_ingest_takes_any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        oracle::json(&bytes);
    }

    #[test]
    fn protobuf_ingest_takes_any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        oracle::protobuf(&bytes);
    }

    #[test]
    fn price_import_takes_any_text(text in ".{0,256}", header in any::<bool>()) {
        let csv = if header { format!("{}\n{text}", prices::COLUMNS.join(",")) } else { text };
        oracle::price_csv(csv.as_bytes());
    }
}

proptest! {
    #![proptest_config(config(MUTATION_CASES))]

    #[test]
    fn json_ingest_takes_mutated_runs(edits in edits()) {
        oracle::json(&apply(JSON_SEED.clone(), &edits));
    }

    #[test]
    fn json_ingest_takes_runs_edited_value_by_value(json in edited_json()) {
        oracle::json(&json);
    }

    #[test]
    fn protobuf_ingest_takes_mutated_runs(edits in edits()) {
        oracle::protobuf(&apply(PROTOBUF_SEED.clone(), &edits));
    }

    #[test]
    fn price_import_takes_mutated_catalogs(edits in edits()) {
        oracle::price_csv(&apply(CSV_SEED.clone(), &edits));
    }

    #[test]
    fn price_import_takes_catalogs_edited_cell_by_cell(csv in edited_catalog()) {
        oracle::price_csv(csv.as_bytes());
    }
}

// Generated runs, mostly valid, with a field now and then outside the model's rules.

fn text(required: bool) -> impl Strategy<Value = String> {
    prop_oneof![
        150 => "[a-zA-Z0-9 ._:/-]{1,24}",
        3 => ".{1,12}",
        1 => Just(String::new()),
        1 => Just(if required { " \t".to_string() } else { String::new() }),
        1 => "[\\x00-\\x1f\\x7f]{1,2}",
        1 => Just("é".repeat(129)),
    ]
}

fn finite() -> impl Strategy<Value = f64> {
    prop_oneof![
        8 => prop::num::f64::POSITIVE | prop::num::f64::NORMAL | prop::num::f64::ZERO,
        4 => prop::num::f64::ANY.prop_filter("finite", |v| v.is_finite()),
        2 => -1e3..1e12f64,
        1 => prop::num::f64::SUBNORMAL,
    ]
}

fn number() -> impl Strategy<Value = f64> {
    prop_oneof![100 => finite(), 1 => Just(f64::NAN), 1 => Just(f64::INFINITY), 1 => Just(f64::NEG_INFINITY)]
}

fn stats() -> impl Strategy<Value = Stats> {
    (prop_oneof![20 => 1..u64::MAX, 1 => Just(0u64)], prop::collection::vec(number(), 7), any::<u8>()).prop_map(
        |(samples, mut v, shuffle)| {
            // Ordered as the rules want, unless `shuffle` says otherwise.
            if shuffle > 8 {
                let (quantiles, ci) = v.split_at_mut(5);
                quantiles[1..].sort_by(f64::total_cmp);
                ci.sort_by(f64::total_cmp);
            }
            Stats { samples, mean: v[0], p50: v[1], p90: v[2], p99: v[3], p999: v[4], ci95_low: v[5], ci95_high: v[6] }
        },
    )
}

fn measurement() -> impl Strategy<Value = Measurement> {
    let parameters = prop::collection::btree_map(text(true), text(false), 0..4);
    (
        (prop::sample::select(Suite::ALL), text(true), parameters, prop::sample::select(Unit::ALL)),
        prop::sample::select(MeasurementStatus::ALL),
        prop::option::of(text(false)),
        prop::option::of(stats()),
        prop::option::of((text(true), number()).prop_map(|(name, value)| Floor { name, value })),
        any::<u8>(),
    )
        .prop_map(|((suite, case, parameters, unit), status, reason, stats, floor, strict)| {
            let mut m = Measurement { suite, case, parameters, unit, status, reason, stats, floor, histogram: None };
            // Mostly what the rules want of status, stats and reason together.
            if strict > 16 {
                if m.status == MeasurementStatus::Ok {
                    m.stats = m.stats.or(Some(Stats::single(1.0)));
                } else {
                    m.stats = None;
                    m.reason = Some(m.reason.unwrap_or_default() + "reason");
                }
            }
            m
        })
}

fn run() -> impl Strategy<Value = RunUpload> {
    let gpu =
        (
            text(true),
            any::<u64>(),
            prop::option::of(text(false)),
            prop::option::of(text(false)),
            any::<Option<u32>>(),
            any::<Option<u32>>(),
        )
            .prop_map(|(name, memory_bytes, driver_version, cuda_version, pcie_generation, pcie_width)| {
                GpuInfo { name, memory_bytes, driver_version, cuda_version, pcie_generation, pcie_width }
            });
    let node = (
        (text(true), text(true), text(false), text(false)),
        prop_oneof![20 => 1..=u32::MAX, 1 => Just(0u32)],
        prop_oneof![20 => 1..=u64::MAX, 1 => Just(0u64)],
        prop::option::of(text(true)),
        prop::option::of(prop_oneof![10 => finite().prop_map(f64::abs), 1 => number()]),
        prop::collection::vec(gpu, 0..3),
    )
        .prop_map(
            |((node_id, hostname, cpu_model, kernel), cpu_cores, memory_bytes, instance_type, hourly_usd, gpus)| {
                NodeInfo {
                    node_id,
                    hostname,
                    cpu_model,
                    cpu_cores,
                    memory_bytes,
                    kernel,
                    instance_type,
                    hourly_usd,
                    gpus,
                }
            },
        );
    (
        prop_oneof![20 => any::<u128>(), 1 => Just(0u128)],
        text(true),
        prop_oneof![20 => 1..i64::MAX / 2, 1 => any::<i64>()],
        prop_oneof![20 => 0..i64::MAX / 2, 1 => any::<i64>()],
        node,
        prop_oneof![20 => prop::collection::vec(measurement(), 1..4), 1 => Just(vec![])],
    )
        .prop_map(|(id, agent_version, started_at_ms, duration, node, measurements)| RunUpload {
            run_id: uuid::Uuid::from_u128(id),
            agent_version,
            started_at_ms,
            finished_at_ms: started_at_ms.saturating_add(duration),
            node,
            measurements,
        })
}

proptest! {
    #![proptest_config(config(RUN_CASES))]

    /// What an agent sends, as JSON and as protobuf: both doors take exactly the valid runs,
    /// unchanged, and refuse an invalid one naming the field the model's rules name.
    #[test]
    fn both_doors_take_exactly_the_valid_runs(run in run()) {
        let json = serde_json::to_vec(&run).unwrap();
        let protobuf = proto::encode_upload(&run);
        oracle::json(&json);
        oracle::protobuf(&protobuf);
        match run.validate() {
            Ok(()) => {
                prop_assert_eq!(decode_json(&json).ok(), Some(run.clone()));
                prop_assert_eq!(proto::decode_upload(&protobuf).ok(), Some(run));
            }
            Err(err) => {
                // JSON has no NaN: serde_json writes it as null, which an optional field reads as
                // absent, so only the protobuf door sees every invalid run as it was.
                let status = proto::decode_upload(&protobuf).expect_err("an invalid run accepted");
                prop_assert_eq!(status.message(), format!("invalid field {err}"));
            }
        }
    }
}
