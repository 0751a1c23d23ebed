//! The hostile-input corpus: hundreds of uploads that are each wrong in one way, generated from a
//! valid run, sent through both ingest doors (HTTP JSON and gRPC) of the real router on a real
//! port, on every backend under test. Each must be refused as the caller's mistake (HTTP
//! 400/401/403/413/415/422; gRPC INVALID_ARGUMENT, RESOURCE_EXHAUSTED, UNAUTHENTICATED,
//! PERMISSION_DENIED), never with a 5xx, INTERNAL, UNKNOWN or success, and nothing may be stored.
//! At the end the unmutated run is sent through both doors and must be stored, which proves the
//! corpus is one mutation away from valid (and that the hand-written protobuf encoder is right).
//!
//! Only values the server's rules refuse are in the corpus (`model::wire::validate`, the serde shapes in
//! `model::wire::run`, the body limits): free text such as a hostname may hold `<script>` and is
//! escaped where it is shown, so such values are not here.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{TestApp, databases, sample_run, spawn};
use headroom_server::auth::Role;
use proto::pb;
use proto::pb::ingest_client::IngestClient;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::Code;
use tonic::transport::Channel;

const RUNS: &str = "/api/v1/runs";
const GRPC_PATH: &str = "/headroom.v1.Ingest/UploadRun";
const INJECTIONS: [&str; 3] =
    ["</textarea><script>alert(1)</script>", "=HYPERLINK(\"http://x\")", "'; DROP TABLE runs;--"];
/// Stands in for a field's value until the raw (possibly invalid) JSON text replaces it.
const MARKER: &str = "@@hostile-raw-value@@";

/// HTTP answers that refuse the content: the only ones a content case may get.
const CONTENT: &[u16] = &[400, 413, 415, 422];
const UNAUTHENTICATED: &[u16] = &[401];
const FORBIDDEN: &[u16] = &[403];
const GRPC_CONTENT: &[Code] = &[Code::InvalidArgument, Code::ResourceExhausted];
const GRPC_UNAUTHENTICATED: &[Code] = &[Code::Unauthenticated];
const GRPC_FORBIDDEN: &[Code] = &[Code::PermissionDenied];

// ---------------------------------------------------------------------------------------------
// The cases.
// ---------------------------------------------------------------------------------------------

/// Who a request claims to be.
#[derive(Clone, Debug)]
enum Auth {
    /// `Authorization: Bearer <the app's agent token>`.
    Agent,
    /// This exact `Authorization` header value.
    Header(String),
    /// This `Cookie` header and no `Authorization`.
    Cookie(String),
    /// No credentials at all.
    Nothing,
}

enum Payload {
    Bytes(Vec<u8>),
    /// This many bytes of JSON-ish padding sent chunked over a raw connection (no Content-Length).
    Chunked(usize),
}

struct HttpCase {
    group: &'static str,
    name: String,
    auth: Auth,
    content_type: Option<String>,
    payload: Payload,
    expect: &'static [u16],
}

enum GrpcPayload {
    /// Sent by the generated tonic client.
    Typed(Box<pb::RunUpload>),
    /// Sent as this exact HTTP/2 body (frame header included) by a raw HTTP/2 client.
    Body { body: Vec<u8>, headers: Vec<(&'static str, &'static str)> },
}

struct GrpcCase {
    group: &'static str,
    name: String,
    auth: Auth,
    payload: GrpcPayload,
    expect: &'static [Code],
}

/// One gRPC frame: compression flag, declared length, message bytes.
fn frame(flag: u8, declared: u32, message: &[u8]) -> Vec<u8> {
    let mut out = vec![flag];
    out.extend_from_slice(&declared.to_be_bytes());
    out.extend_from_slice(message);
    out
}

fn whole_frame(message: &[u8]) -> Vec<u8> {
    frame(0, u32::try_from(message.len()).expect("under 4 GiB"), message)
}

fn replace_once(haystack: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
    let at = haystack.windows(needle.len()).position(|w| w == needle).expect("marker present");
    [&haystack[..at], with, &haystack[at + needle.len()..]].concat()
}

/// The valid run every JSON case mutates: the common sample plus one GPU, so GPU fields can be
/// mutated too.
fn base_json() -> Value {
    let mut base = serde_json::to_value(sample_run("node-hostile")).expect("serialise");
    base["node"]["gpus"] = json!([{
        "name": "NVIDIA A100-SXM4-80GB", "memory_bytes": 85_899_345_920u64, "driver_version": "550.54.15",
        "cuda_version": "12.4", "pcie_generation": 4, "pcie_width": 16
    }]);
    base
}

fn base_pb() -> pb::RunUpload {
    let mut run: pb::RunUpload = (&sample_run("node-hostile")).into();
    run.node.as_mut().expect("node").gpus.push(pb::Gpu {
        name: "NVIDIA A100-SXM4-80GB".into(),
        memory_bytes: 85_899_345_920,
        driver_version: Some("550.54.15".into()),
        cuda_version: Some("12.4".into()),
        pcie_generation: Some(4),
        pcie_width: Some(16),
    });
    run
}

/// Builds the JSON cases from mutations of [`base_json`].
struct JsonCorpus {
    base: Value,
    cases: Vec<HttpCase>,
}

impl JsonCorpus {
    fn push(&mut self, group: &'static str, name: String, body: Vec<u8>) {
        self.cases.push(HttpCase {
            group,
            name,
            auth: Auth::Agent,
            content_type: Some("application/json".into()),
            payload: Payload::Bytes(body),
            expect: CONTENT,
        });
    }

    fn mutated(&self, f: impl FnOnce(&mut Value)) -> Vec<u8> {
        let mut value = self.base.clone();
        f(&mut value);
        serde_json::to_vec(&value).expect("serialise")
    }

    /// `path` (a JSON pointer) set to `value`.
    fn set(&mut self, group: &'static str, path: &str, what: &str, value: Value) {
        let body = self.mutated(|v| *v.pointer_mut(path).unwrap_or_else(|| panic!("no {path}")) = value);
        self.push(group, format!("{path} = {what}"), body);
    }

    /// `path` set to this raw JSON text (which may be invalid JSON).
    fn set_raw(&mut self, group: &'static str, path: &str, what: &str, raw: &[u8]) {
        let body = self.mutated(|v| *v.pointer_mut(path).unwrap_or_else(|| panic!("no {path}")) = json!(MARKER));
        let body = replace_once(&body, format!("\"{MARKER}\"").as_bytes(), raw);
        self.push(group, format!("{path} = {what}"), body);
    }

    /// `path` removed from its object.
    fn remove(&mut self, group: &'static str, path: &str) {
        let (parent, key) = path.rsplit_once('/').expect("a pointer");
        let body = self.mutated(|v| {
            let object = v.pointer_mut(parent).and_then(Value::as_object_mut).expect("an object");
            assert!(object.remove(key).is_some(), "no {path}");
        });
        self.push(group, format!("{path} missing"), body);
    }

    /// `key` added to the object at `parent`.
    fn insert(&mut self, group: &'static str, parent: &str, key: &str, value: Value) {
        let body = self.mutated(|v| {
            let object = v.pointer_mut(parent).and_then(Value::as_object_mut).expect("an object");
            object.insert(key.to_string(), value);
        });
        self.push(group, format!("{parent}/{key:?} added"), body);
    }

    /// The valid body's text with `from` replaced (once) by `to`.
    fn edit_text(&mut self, group: &'static str, name: &str, from: &str, to: &str) {
        let text = serde_json::to_vec(&self.base).expect("serialise");
        let body = replace_once(&text, from.as_bytes(), to.as_bytes());
        self.push(group, name.to_string(), body);
    }
}

/// How a text field may be filled.
#[derive(Clone, Copy, PartialEq)]
enum Text {
    /// Not an `Option`, must not be blank.
    Required,
    /// Not an `Option`, may be empty.
    Free,
    /// An `Option` that, when given, must not be blank.
    OptionalRequired,
    /// An `Option` that may be empty.
    OptionalFree,
}

fn control_strings() -> Vec<(&'static str, String)> {
    vec![
        ("NUL", "a\u{0}b".into()),
        ("ESC", "x\u{1b}[2J".into()),
        ("BEL", "ding\u{7}".into()),
        ("backspace", "abc\u{8}\u{8}".into()),
        ("vertical tab", "a\u{b}b".into()),
        ("form feed", "a\u{c}b".into()),
        ("U+0001", "\u{1}".into()),
        ("DEL", "a\u{7f}".into()),
        ("NEL (C1)", "a\u{85}b".into()),
        ("CSI (C1)", "\u{9b}31m".into()),
    ]
}

fn long_strings() -> Vec<(&'static str, String)> {
    vec![
        ("257 bytes", "a".repeat(model::wire::validate::MAX_TEXT + 1)),
        ("86 × '€' (258 bytes)", "€".repeat(86)),
        ("64 KiB", "x".repeat(64 << 10)),
    ]
}

/// JSON text that is not a valid string: lone surrogates, bad escapes, raw control bytes,
/// unterminated.
fn raw_bad_strings() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("lone leading surrogate \\ud800", br#""\ud800""#.to_vec()),
        ("lone trailing surrogate \\udfff", br#""\udfff""#.to_vec()),
        ("surrogate then letter \\ud800\\u0041", br#""\ud800\u0041""#.to_vec()),
        ("reversed surrogates \\udc00\\ud800", br#""\udc00\ud800""#.to_vec()),
        ("bad escape \\x41", br#""\x41""#.to_vec()),
        ("short escape \\u12", br#""\u12""#.to_vec()),
        ("raw NUL byte in string", b"\"a\0b\"".to_vec()),
        ("raw ESC byte in string", b"\"a\x1bb\"".to_vec()),
        ("raw newline in string", b"\"a\nb\"".to_vec()),
        ("invalid UTF-8 0xff", b"\"\xff\"".to_vec()),
        ("overlong UTF-8 0xc0 0xaf", b"\"\xc0\xaf\"".to_vec()),
        ("UTF-8-encoded surrogate", b"\"\xed\xa0\x80\"".to_vec()),
        ("five-byte UTF-8", b"\"\xf8\x88\x80\x80\x80\"".to_vec()),
        ("truncated UTF-8 sequence", b"\"\xe2\x82\"".to_vec()),
        ("unterminated string", b"\"abc".to_vec()),
        ("single-quoted string", b"'abc'".to_vec()),
    ]
}

fn wrong_types() -> Vec<(&'static str, Value)> {
    vec![
        ("number", json!(1)),
        ("float", json!(1.5)),
        ("bool", json!(true)),
        ("array", json!(["a"])),
        ("object", json!({"a": "b"})),
    ]
}

fn text_cases(corpus: &mut JsonCorpus, group: &'static str, path: &str, kind: Text) {
    for (what, value) in wrong_types() {
        corpus.set(group, path, what, value);
    }
    if matches!(kind, Text::Required | Text::Free) {
        corpus.set(group, path, "null", Value::Null);
    }
    if matches!(kind, Text::Required | Text::OptionalRequired) {
        for blank in ["", " ", "\t\r\n"] {
            corpus.set(group, path, &format!("blank {blank:?}"), json!(blank));
        }
    }
    for (what, value) in control_strings() {
        corpus.set(group, path, what, json!(value));
    }
    for (what, value) in long_strings() {
        corpus.set(group, path, what, json!(value));
    }
    for (what, raw) in raw_bad_strings() {
        corpus.set_raw(group, path, what, &raw);
    }
}

/// Raw number-ish tokens that are not valid JSON numbers (or not finite ones).
fn raw_bad_numbers() -> Vec<(&'static str, Vec<u8>)> {
    let mut huge = b"1".to_vec();
    huge.extend(std::iter::repeat_n(b'0', 400));
    vec![
        ("NaN token", b"NaN".to_vec()),
        ("Infinity token", b"Infinity".to_vec()),
        ("-Infinity token", b"-Infinity".to_vec()),
        ("1e999 (overflows f64)", b"1e999".to_vec()),
        ("-1e999", b"-1e999".to_vec()),
        ("1 followed by 400 zeros", huge),
        ("hex 0x10", b"0x10".to_vec()),
        ("leading plus +1", b"+1".to_vec()),
        ("leading zero 01", b"01".to_vec()),
        ("bare fraction .5", b".5".to_vec()),
        ("trailing dot 1.", b"1.".to_vec()),
        ("bare exponent 1e", b"1e".to_vec()),
        ("lone minus", b"-".to_vec()),
    ]
}

/// An integer field: types, nulls, non-integers, out of range, plus the field's own invalid values.
fn integer_cases(corpus: &mut JsonCorpus, group: &'static str, path: &str, own: Vec<(&str, Value)>) {
    let common: Vec<(&str, Value)> = vec![
        ("null", Value::Null),
        ("-1", json!(-1)),
        ("1.5", json!(1.5)),
        ("1e300", json!(1e300)),
        ("string \"8\"", json!("8")),
        ("string \"NaN\"", json!("NaN")),
        ("bool", json!(true)),
        ("array", json!([1])),
        ("object", json!({})),
        ("injection", json!(INJECTIONS[2])),
    ];
    for (what, value) in common.into_iter().chain(own) {
        corpus.set(group, path, what, value);
    }
    corpus.set_raw(group, path, "18446744073709551616 (2^64)", b"18446744073709551616");
    corpus.set_raw(group, path, "-9223372036854775809 (below i64)", b"-9223372036854775809");
    for (what, raw) in raw_bad_numbers() {
        corpus.set_raw(group, path, what, &raw);
    }
}

/// A float field: types, non-finite written as text or as strings, plus its own invalid values.
fn float_cases(corpus: &mut JsonCorpus, group: &'static str, path: &str, nullable: bool, own: Vec<(&str, Value)>) {
    let mut values: Vec<(&str, Value)> = vec![
        ("string \"1\"", json!("1")),
        ("string \"NaN\"", json!("NaN")),
        ("string \"Infinity\"", json!("Infinity")),
        ("string \"-Infinity\"", json!("-Infinity")),
        ("bool", json!(false)),
        ("array", json!([1.0])),
        ("object", json!({"value": 1})),
        ("injection", json!(INJECTIONS[1])),
    ];
    if !nullable {
        values.push(("null", Value::Null));
    }
    for (what, value) in values.into_iter().chain(own) {
        corpus.set(group, path, what, value);
    }
    for (what, raw) in raw_bad_numbers() {
        corpus.set_raw(group, path, what, &raw);
    }
}

fn enum_cases(corpus: &mut JsonCorpus, group: &'static str, path: &str, valid: &str, own: Vec<(&str, Value)>) {
    let mut values: Vec<(&str, Value)> = vec![
        ("empty", json!("")),
        ("upper case", json!(valid.to_uppercase())),
        ("leading space", json!(format!(" {valid}"))),
        ("trailing NUL", json!(format!("{valid}\u{0}"))),
        ("unknown name", json!("warp")),
        ("number", json!(1)),
        ("zero", json!(0)),
        ("null", Value::Null),
        ("bool", json!(true)),
        ("array of the valid name", json!([valid])),
        ("object with a value", json!({ valid: 1 })),
        ("257 bytes", json!("s".repeat(257))),
    ];
    for (i, injection) in INJECTIONS.iter().enumerate() {
        values.push((["script injection", "formula injection", "SQL injection"][i], json!(injection)));
    }
    for (what, value) in values.into_iter().chain(own) {
        corpus.set(group, path, what, value);
    }
    corpus.set_raw(group, path, "lone surrogate", br#""\ud800""#);
}

fn json_corpus() -> Vec<HttpCase> {
    let mut c = JsonCorpus { base: base_json(), cases: Vec::new() };

    // run_id: a UUID, not the nil one.
    let mut ids: Vec<(&str, Value)> = vec![
        ("empty", json!("")),
        ("not a UUID", json!("not-a-uuid")),
        ("nil UUID", json!("00000000-0000-0000-0000-000000000000")),
        ("nil UUID as URN", json!("urn:uuid:00000000-0000-0000-0000-000000000000")),
        ("nil UUID braced", json!("{00000000-0000-0000-0000-000000000000}")),
        ("35 characters", json!("67e55044-10b1-426f-9247-bb680e5fe0c")),
        ("37 characters", json!("67e55044-10b1-426f-9247-bb680e5fe0c8a")),
        ("non-hex digit", json!("g7e55044-10b1-426f-9247-bb680e5fe0c8")),
        ("UUID with NUL", json!("67e55044-10b1-426f-9247-bb680e5fe0c8\u{0}")),
        ("UUID with ESC", json!("\u{1b}67e55044-10b1-426f-9247-bb680e5fe0c8")),
        ("number", json!(1234)),
        ("float", json!(1.5)),
        ("null", Value::Null),
        ("bool", json!(true)),
        ("array", json!([1, 2])),
        ("object", json!({"id": "67e55044-10b1-426f-9247-bb680e5fe0c8"})),
    ];
    for (i, injection) in INJECTIONS.iter().enumerate() {
        ids.push((["script injection", "formula injection", "SQL injection"][i], json!(injection)));
    }
    for (what, value) in ids {
        c.set("run_id", "/run_id", what, value);
    }
    c.set_raw("run_id", "/run_id", "lone surrogate", br#""\ud800""#);
    c.set_raw("run_id", "/run_id", "u128 as a number", b"137001268396929227412018473934540939464");

    // Free text, each by its rules.
    let texts: [(&str, &'static str, Text); 11] = [
        ("/agent_version", "agent_version", Text::Required),
        ("/node/node_id", "node.node_id", Text::Required),
        ("/node/hostname", "node.hostname", Text::Required),
        ("/node/cpu_model", "node.cpu_model", Text::Free),
        ("/node/kernel", "node.kernel", Text::Free),
        ("/node/instance_type", "node.instance_type", Text::OptionalRequired),
        ("/node/gpus/0/name", "node.gpus[].name", Text::Required),
        ("/measurements/0/case", "measurements[].case", Text::Required),
        ("/measurements/3/floor/name", "measurements[].floor.name", Text::Required),
        ("/measurements/4/reason", "measurements[].reason (skipped)", Text::OptionalRequired),
        ("/measurements/1/reason", "measurements[].reason (ok)", Text::OptionalFree),
    ];
    for (path, group, kind) in texts {
        text_cases(&mut c, group, path, kind);
    }
    text_cases(&mut c, "measurements[].parameters value", "/measurements/0/parameters/threads", Text::Free);

    // Parameter keys are text too (required), and the map has a size limit.
    let group = "measurements[].parameters key";
    let mut keys: Vec<(String, String)> = vec![
        ("empty key".into(), String::new()),
        ("blank key".into(), "  ".into()),
        ("257-byte key".into(), "k".repeat(257)),
    ];
    for (what, value) in control_strings() {
        keys.push((format!("key with {what}"), value));
    }
    for (what, key) in keys {
        let body = c.mutated(|v| {
            v["measurements"][0]["parameters"][key.as_str()] = json!("1");
        });
        c.push(group, what, body);
    }
    let body = c.mutated(|v| {
        v["measurements"][0]["parameters"] =
            (0..=model::wire::validate::MAX_PARAMETERS).map(|i| (format!("k{i}"), json!("v"))).collect();
    });
    c.push(group, format!("{} parameters", model::wire::validate::MAX_PARAMETERS + 1), body);
    for (what, value) in [
        ("null", Value::Null),
        ("array", json!([["bytes", "1"]])),
        ("string", json!("bytes=1")),
        ("number", json!(1)),
        ("number value", json!({"bytes": 1})),
        ("null value", json!({"bytes": null})),
        ("bool value", json!({"bytes": true})),
        ("object value", json!({"bytes": {}})),
        ("array value", json!({"bytes": ["1"]})),
    ] {
        c.set(group, "/measurements/0/parameters", what, value);
    }
    c.edit_text(group, "key with lone surrogate", "\"threads\"", r#""\ud800""#);

    // Times.
    integer_cases(
        &mut c,
        "started_at_ms",
        "/started_at_ms",
        vec![
            ("0", json!(0)),
            ("i64::MIN", json!(i64::MIN)),
            ("2^63 (above i64)", json!(9_223_372_036_854_775_808u64)),
            ("after finished_at_ms", json!(1_796_000_005_001i64)),
        ],
    );
    integer_cases(
        &mut c,
        "finished_at_ms",
        "/finished_at_ms",
        vec![
            ("0", json!(0)),
            ("1", json!(1)),
            ("before started_at_ms", json!(1_795_999_999_999i64)),
            ("i64::MIN", json!(i64::MIN)),
        ],
    );

    // Node counts and sizes.
    integer_cases(
        &mut c,
        "node.cpu_cores",
        "/node/cpu_cores",
        vec![("0", json!(0)), ("2^32", json!(4_294_967_296u64))],
    );
    integer_cases(&mut c, "node.memory_bytes", "/node/memory_bytes", vec![("0", json!(0))]);
    integer_cases(&mut c, "node.gpus[].memory_bytes", "/node/gpus/0/memory_bytes", vec![]);
    float_cases(
        &mut c,
        "node.hourly_usd",
        "/node/hourly_usd",
        true,
        vec![("-1", json!(-1.0)), ("-1e-9", json!(-1e-9)), ("-1e300", json!(-1e300))],
    );

    // Statistics: types, non-finite values, and the order of the quantiles.
    integer_cases(&mut c, "stats.samples", "/measurements/0/stats/samples", vec![("0", json!(0))]);
    let above_all = json!(1e300);
    let below_all = json!(-1.0);
    let stats_fields: [(&str, Option<Value>); 7] = [
        ("mean", None),
        ("p50", Some(above_all.clone())),
        ("p90", Some(below_all.clone())),
        ("p99", Some(below_all.clone())),
        ("p999", Some(below_all.clone())),
        ("ci95_low", Some(above_all)),
        ("ci95_high", Some(below_all)),
    ];
    for (name, out_of_order) in stats_fields {
        let path = format!("/measurements/0/stats/{name}");
        let own = out_of_order.map(|v| vec![("out of order", v)]).unwrap_or_default();
        float_cases(&mut c, "stats.<number>", &path, false, own);
        c.remove("stats.<number>", &path);
    }
    // The same orders on a case measured in seconds (small numbers).
    for (name, value) in [("p50", 1.0), ("p90", 0.0), ("p99", -4e-6), ("p999", 1e-9), ("ci95_low", 1.0)] {
        c.set("stats.<number>", &format!("/measurements/3/stats/{name}"), "out of order", json!(value));
    }
    float_cases(&mut c, "floor.value", "/measurements/3/floor/value", false, vec![]);

    // Closed sets.
    enum_cases(
        &mut c,
        "measurements[].suite",
        "/measurements/0/suite",
        "system",
        vec![("a unit's name", json!("seconds"))],
    );
    enum_cases(
        &mut c,
        "measurements[].unit",
        "/measurements/1/unit",
        "bytes_per_second",
        vec![("a suite's name", json!("system"))],
    );
    enum_cases(
        &mut c,
        "measurements[].status",
        "/measurements/2/status",
        "ok",
        vec![
            ("'skipped' while stats are given", json!("skipped")),
            ("'failed' while stats are given", json!("failed")),
        ],
    );
    c.set("measurements[].status", "/measurements/4/status", "'ok' without stats", json!("ok"));

    // Structure: required fields missing, containers of the wrong shape, unknown fields.
    let group = "structure";
    for path in [
        "/run_id",
        "/agent_version",
        "/started_at_ms",
        "/finished_at_ms",
        "/node",
        "/measurements",
        "/node/node_id",
        "/node/hostname",
        "/node/cpu_model",
        "/node/cpu_cores",
        "/node/memory_bytes",
        "/node/kernel",
        "/node/gpus/0/name",
        "/node/gpus/0/memory_bytes",
        "/measurements/0/suite",
        "/measurements/0/case",
        "/measurements/0/unit",
        "/measurements/0/status",
        "/measurements/0/stats",
        "/measurements/4/reason",
        "/measurements/3/floor/name",
        "/measurements/3/floor/value",
    ] {
        c.remove(group, path);
    }
    for (path, what, value) in [
        ("/node", "null", Value::Null),
        ("/node", "array", json!([])),
        ("/node", "string", json!("node-1")),
        ("/node", "empty object", json!({})),
        ("/measurements", "null", Value::Null),
        ("/measurements", "empty", json!([])),
        ("/measurements", "object", json!({"0": {}})),
        ("/measurements", "string", json!("memcpy")),
        ("/measurements", "[null]", json!([null])),
        ("/measurements", "[1]", json!([1])),
        ("/measurements", "[[]]", json!([[]])),
        ("/measurements", "[{}]", json!([{}])),
        ("/measurements/0", "null", Value::Null),
        ("/measurements/0/stats", "string", json!("fast")),
        ("/measurements/0/stats", "array", json!([1, 2, 3])),
        ("/measurements/0/stats", "empty object", json!({})),
        ("/measurements/2/stats", "null while status is ok", Value::Null),
        ("/measurements/4/stats", "given while skipped", serde_json::to_value(common::stats(1.0)).unwrap()),
        ("/measurements/3/floor", "string", json!("spin")),
        ("/measurements/3/floor", "empty object", json!({})),
        ("/measurements/3/floor", "array of one", json!(["spin"])),
        ("/measurements/3/floor", "array of three", json!(["spin", 1.0, 2.0])),
        ("/node/gpus", "null", Value::Null),
        ("/node/gpus", "object", json!({"name": "A100"})),
        ("/node/gpus", "string", json!("A100")),
        ("/node/gpus", "[null]", json!([null])),
        ("/node/gpus", "[1]", json!([1])),
        ("/node/gpus/0/pcie_generation", "-1", json!(-1)),
        ("/node/gpus/0/pcie_width", "string", json!("x16")),
        ("/node/gpus/0/driver_version", "number", json!(550)),
        ("/node/gpus/0/cuda_version", "array", json!(["12.4"])),
    ] {
        c.set(group, path, what, value);
    }
    let measurement = c.base["measurements"][0].clone();
    let body =
        c.mutated(|v| v["measurements"] = Value::Array(vec![measurement; model::wire::validate::MAX_MEASUREMENTS + 1]));
    c.push(group, format!("{} measurements", model::wire::validate::MAX_MEASUREMENTS + 1), body);
    let gpu = c.base["node"]["gpus"][0].clone();
    let body = c.mutated(|v| v["node"]["gpus"] = Value::Array(vec![gpu; model::wire::validate::MAX_GPUS + 1]));
    c.push(group, format!("{} GPUs", model::wire::validate::MAX_GPUS + 1), body);

    let group = "unknown fields";
    for (parent, key, value) in [
        ("", "colour", json!("blue")),
        ("", "Run_id", json!("67e55044-10b1-426f-9247-bb680e5fe0c8")),
        ("", "__proto__", json!({"admin": true})),
        ("", "constructor", json!({"prototype": {}})),
        ("", "", json!(1)),
        ("", "role", json!("admin")),
        ("", "agent_id", json!("someone-else")),
        ("", "owner_agent_id", json!("someone-else")),
        ("/node", "owner_agent_id", json!("someone-else")),
        ("/node", "extra", Value::Null),
        ("/node/gpus/0", "vendor", json!("nvidia")),
        ("/measurements/0", "extra", json!(1)),
        ("/measurements/0", "Suite", json!("system")),
        ("/measurements/0/stats", "p9999", json!(1.0)),
        ("/measurements/3/floor", "unit", json!("seconds")),
    ] {
        c.insert(group, parent, key, value);
    }
    let mut deep = "[".repeat(100_000);
    deep.push_str(&"]".repeat(100_000));
    let body = c.mutated(|v| v["x"] = json!(MARKER));
    c.push(
        group,
        "unknown field holding 100k nested arrays".into(),
        replace_once(&body, format!("\"{MARKER}\"").as_bytes(), deep.as_bytes()),
    );

    let group = "duplicate keys";
    let run_id = c.base["run_id"].as_str().unwrap().to_string();
    c.edit_text(group, "run_id twice", "\"run_id\":", &format!("\"run_id\":\"{run_id}\",\"run_id\":"));
    c.edit_text(group, "node.hostname twice", "\"node\":{", "\"node\":{\"hostname\":\"other\",");
    c.edit_text(group, "measurements[0].case twice", "\"measurements\":[{", "\"measurements\":[{\"case\":\"other\",");
    c.edit_text(group, "stats.p50 twice", "\"stats\":{", "\"stats\":{\"p50\":1.0,");
    c.edit_text(group, "node given twice", "\"measurements\":[", "\"node\":{},\"measurements\":[");

    c.cases
}

/// Bodies that are not one JSON object of the right shape at all.
fn raw_corpus() -> Vec<HttpCase> {
    let valid = serde_json::to_vec(&base_json()).expect("serialise");
    let mut cases: Vec<(&'static str, String, Vec<u8>)> = Vec::new();
    let mut add = |group: &'static str, name: String, body: Vec<u8>| cases.push((group, name, body));

    // Not the right kind of JSON value.
    for (name, body) in [
        ("empty body", ""),
        ("a space", " "),
        ("a newline", "\n"),
        ("null", "null"),
        ("true", "true"),
        ("zero", "0"),
        ("negative number", "-1"),
        ("1e999", "1e999"),
        ("NaN", "NaN"),
        ("string", "\"run\""),
        ("empty array", "[]"),
        ("array of numbers", "[1,2]"),
        ("empty object", "{}"),
        ("object of nulls", "{\"run_id\":null,\"node\":null}"),
    ] {
        add("body: wrong JSON value", name.into(), body.as_bytes().to_vec());
    }
    add("body: wrong JSON value", "the valid run inside an array".into(), [b"[", &valid[..], b"]"].concat());
    add(
        "body: wrong JSON value",
        "the valid run as a string".into(),
        serde_json::to_vec(&Value::String(String::from_utf8(valid.clone()).unwrap())).unwrap(),
    );
    add("body: wrong JSON value", "the valid run under a key".into(), [b"{\"run\":", &valid[..], b"}"].concat());

    // Every strict prefix of the valid body is incomplete JSON.
    let step = valid.len() / 60;
    for cut in (1..valid.len()).step_by(step.max(1)) {
        add("body: truncated JSON", format!("first {cut} of {} bytes", valid.len()), valid[..cut].to_vec());
    }
    add("body: truncated JSON", "all but the last byte".into(), valid[..valid.len() - 1].to_vec());

    // Something after the value, or before it.
    for (name, suffix) in
        [("trailing x", &b"x"[..]), ("a second object", b"{}"), ("trailing NUL byte", b"\0"), ("trailing comma", b",")]
    {
        add("body: bytes around the JSON", name.into(), [&valid[..], suffix].concat());
    }
    for (name, prefix) in [
        ("UTF-8 byte order mark", &b"\xef\xbb\xbf"[..]),
        ("line comment", b"// run\n"),
        ("block comment", b"/* run */"),
        ("NUL byte", b"\0"),
        ("UTF-16 byte order mark", b"\xff\xfe"),
    ] {
        add("body: bytes around the JSON", name.into(), [prefix, &valid[..]].concat());
    }

    // Invalid UTF-8 between tokens and inside strings.
    let at = valid.iter().position(|&b| b == b',').unwrap();
    for (name, bytes) in
        [("0x80 between tokens", &b"\x80"[..]), ("0xff between tokens", b"\xff"), ("UTF-16 text", b"\x00{\x00")]
    {
        add("body: invalid UTF-8", name.into(), [&valid[..at], bytes, &valid[at..]].concat());
    }
    let hostname = b"node-hostile";
    let at = valid.windows(hostname.len()).position(|w| w == hostname).unwrap();
    for (name, bytes) in [
        ("0xff in a node name", &b"\xff"[..]),
        ("overlong slash in a node name", b"\xc0\xaf"),
        ("encoded surrogate in a node name", b"\xed\xb0\x80"),
        ("truncated sequence in a node name", b"\xf0\x9f\x98"),
    ] {
        add("body: invalid UTF-8", name.into(), [&valid[..at], bytes, &valid[at..]].concat());
    }
    add("body: invalid UTF-8", "Latin-1 é in a node name".into(), [&valid[..at], b"\xe9", &valid[at..]].concat());

    // Deep nesting.
    for (name, body) in [
        ("100k '['", "[".repeat(100_000)),
        ("100k '[' closed", format!("{}{}", "[".repeat(100_000), "]".repeat(100_000))),
        ("50k '{\"a\":'", "{\"a\":".repeat(50_000)),
        ("129 nested arrays (past serde_json's limit)", format!("{}{}", "[".repeat(129), "]".repeat(129))),
    ] {
        add("body: deep nesting", name.into(), body.into_bytes());
    }
    let id = b"\"run_id\":";
    let at = valid.windows(id.len()).position(|w| w == id).unwrap() + id.len();
    let close = at + valid[at..].iter().position(|&b| b == b',').unwrap();
    let nested = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    add(
        "body: deep nesting",
        "run_id holds 100k nested arrays".into(),
        [&valid[..at], nested.as_bytes(), &valid[close..]].concat(),
    );
    let nested = "{\"a\":".repeat(20_000);
    add(
        "body: deep nesting",
        "run_id holds 20k nested objects".into(),
        [&valid[..at], nested.as_bytes(), &valid[close..]].concat(),
    );

    let mut http: Vec<HttpCase> = cases
        .into_iter()
        .map(|(group, name, body)| HttpCase {
            group,
            name,
            auth: Auth::Agent,
            content_type: Some("application/json".into()),
            payload: Payload::Bytes(body),
            expect: CONTENT,
        })
        .collect();

    // Over the 16 MiB ingest limit, announced or not.
    let limit = headroom_server::ingest::MAX_UPLOAD_BYTES;
    let mut padded = valid.clone();
    padded.truncate(valid.len() - 1);
    padded.extend(std::iter::repeat_n(b' ', limit + 1 - valid.len()));
    padded.push(b'}');
    for (name, body) in [
        ("17 MiB of spaces".to_string(), vec![b' '; 17 << 20]),
        ("the valid run padded to 16 MiB + 1 byte".to_string(), padded),
        ("a 17 MiB hostname".to_string(), {
            let mut run = base_json();
            run["node"]["hostname"] = json!("h".repeat(17 << 20));
            serde_json::to_vec(&run).unwrap()
        }),
    ] {
        http.push(HttpCase {
            group: "body: over 16 MiB",
            name,
            auth: Auth::Agent,
            content_type: Some("application/json".into()),
            payload: Payload::Bytes(body),
            expect: CONTENT,
        });
    }
    http.push(HttpCase {
        group: "body: over 16 MiB",
        name: "17 MiB chunked, no Content-Length".into(),
        auth: Auth::Agent,
        content_type: Some("application/json".into()),
        payload: Payload::Chunked(17 << 20),
        expect: CONTENT,
    });

    // The valid run under a type that is not JSON.
    for content_type in [
        None,
        Some(""),
        Some("text/plain"),
        Some("text/json"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=x"),
        Some("application/xml"),
        Some("application/jsonx"),
        Some("application/json-patch+json"),
        Some("application/ json"),
        Some("json"),
        Some("application/grpc"),
        Some("*/*"),
    ] {
        http.push(HttpCase {
            group: "wrong content type",
            name: format!("Content-Type: {content_type:?}"),
            auth: Auth::Agent,
            content_type: content_type.map(str::to_string),
            payload: Payload::Bytes(valid.clone()),
            expect: CONTENT,
        });
    }
    http
}

/// Requests that are not an agent's: the valid run (and some invalid ones) without the right token.
fn auth_corpus(agent: &str, people: &People) -> Vec<HttpCase> {
    let valid = serde_json::to_vec(&base_json()).expect("serialise");
    let json_type = Some("application/json".to_string());
    let mut cases = Vec::new();
    let mut add = |name: String, auth: Auth, payload: Payload, expect: &'static [u16]| {
        let group = if expect == FORBIDDEN { "auth: a person, not an agent" } else { "auth: no or bad token" };
        cases.push(HttpCase { group, name, auth, content_type: json_type.clone(), payload, expect });
    };
    for (name, header) in [
        (
            "unknown agent token",
            "Bearer hr_agent_0000000000000000000000000000000000000000000000000000000000000000".into(),
        ),
        ("agent token with a byte more", format!("Bearer {agent}x")),
        ("agent token missing its last byte", format!("Bearer {}", &agent[..agent.len() - 1])),
        ("agent token without 'Bearer '", agent.to_string()),
        ("'Token' scheme", format!("Token {agent}")),
        ("Basic auth", "Basic YWdlbnQ6c2VjcmV0".into()),
        ("'Bearer' with no token", "Bearer".into()),
        ("'Bearer ' and spaces", "Bearer    ".into()),
        ("revoked API token of an admin", format!("Bearer {}", people.revoked)),
        ("expired API token of an admin", format!("Bearer {}", people.expired)),
        ("SQL injection as the token", "Bearer ' OR '1'='1".into()),
    ] {
        add(name.into(), Auth::Header(header), Payload::Bytes(valid.clone()), UNAUTHENTICATED);
    }
    add("no credentials".into(), Auth::Nothing, Payload::Bytes(valid.clone()), UNAUTHENTICATED);
    add(
        "an unknown session cookie".into(),
        Auth::Cookie("headroom_session=forged".into()),
        Payload::Bytes(valid.clone()),
        UNAUTHENTICATED,
    );
    add("no credentials, 17 MiB".into(), Auth::Nothing, Payload::Bytes(vec![b' '; 17 << 20]), UNAUTHENTICATED);
    add("no credentials, 17 MiB chunked".into(), Auth::Nothing, Payload::Chunked(17 << 20), UNAUTHENTICATED);
    add("no credentials, garbage".into(), Auth::Nothing, Payload::Bytes(b"\xff\xfe[[[[".to_vec()), UNAUTHENTICATED);
    add(
        "unknown token, 100k nested arrays".into(),
        Auth::Header("Bearer nope".into()),
        Payload::Bytes("[".repeat(100_000).into_bytes()),
        UNAUTHENTICATED,
    );
    for (role, token) in &people.tokens {
        add(
            format!("{} API token", role.as_str()),
            Auth::Header(format!("Bearer {token}")),
            Payload::Bytes(valid.clone()),
            FORBIDDEN,
        );
    }
    add(
        "admin session cookie".into(),
        Auth::Cookie(people.admin_session.clone()),
        Payload::Bytes(valid.clone()),
        FORBIDDEN,
    );
    cases
}

// ---------------------------------------------------------------------------------------------
// gRPC: a hand-written protobuf encoder (the server's test dependencies do not include prost),
// checked at the end by uploading its encoding of the valid run.
// ---------------------------------------------------------------------------------------------

mod wire {
    pub fn varint(out: &mut Vec<u8>, mut value: u64) {
        while value >= 0x80 {
            out.push((value as u8) | 0x80);
            value >>= 7;
        }
        out.push(value as u8);
    }

    pub fn key(out: &mut Vec<u8>, field: u32, wire_type: u8) {
        varint(out, u64::from((field << 3) | u32::from(wire_type)));
    }

    pub fn bytes(out: &mut Vec<u8>, field: u32, body: &[u8]) {
        key(out, field, 2);
        varint(out, body.len() as u64);
        out.extend_from_slice(body);
    }

    pub fn string(out: &mut Vec<u8>, field: u32, value: &str) {
        if !value.is_empty() {
            bytes(out, field, value.as_bytes());
        }
    }

    pub fn optional_string(out: &mut Vec<u8>, field: u32, value: Option<&String>) {
        if let Some(value) = value {
            bytes(out, field, value.as_bytes());
        }
    }

    pub fn uint(out: &mut Vec<u8>, field: u32, value: u64) {
        if value != 0 {
            key(out, field, 0);
            varint(out, value);
        }
    }

    pub fn int(out: &mut Vec<u8>, field: u32, value: i64) {
        uint(out, field, value as u64);
    }

    pub fn double(out: &mut Vec<u8>, field: u32, value: f64) {
        if value != 0.0 {
            key(out, field, 1);
            out.extend_from_slice(&value.to_le_bytes());
        }
    }
}

fn encode_node(node: &pb::Node) -> Vec<u8> {
    let mut out = Vec::new();
    wire::string(&mut out, 1, &node.node_id);
    wire::string(&mut out, 2, &node.hostname);
    wire::string(&mut out, 3, &node.cpu_model);
    wire::uint(&mut out, 4, u64::from(node.cpu_cores));
    wire::uint(&mut out, 5, node.memory_bytes);
    wire::string(&mut out, 6, &node.kernel);
    wire::optional_string(&mut out, 7, node.instance_type.as_ref());
    if let Some(price) = node.hourly_usd {
        wire::key(&mut out, 8, 1);
        out.extend_from_slice(&price.to_le_bytes());
    }
    for gpu in &node.gpus {
        let mut g = Vec::new();
        wire::string(&mut g, 1, &gpu.name);
        wire::uint(&mut g, 2, gpu.memory_bytes);
        wire::optional_string(&mut g, 3, gpu.driver_version.as_ref());
        wire::optional_string(&mut g, 4, gpu.cuda_version.as_ref());
        for (field, value) in [(5, gpu.pcie_generation), (6, gpu.pcie_width)] {
            if let Some(value) = value {
                wire::key(&mut g, field, 0);
                wire::varint(&mut g, u64::from(value));
            }
        }
        wire::bytes(&mut out, 9, &g);
    }
    out
}

fn encode_measurement(m: &pb::Measurement) -> Vec<u8> {
    let mut out = Vec::new();
    wire::string(&mut out, 1, &m.suite);
    wire::string(&mut out, 2, &m.case);
    let parameters: BTreeMap<&String, &String> = m.parameters.iter().collect();
    for (key, value) in parameters {
        let mut entry = Vec::new();
        wire::string(&mut entry, 1, key);
        wire::string(&mut entry, 2, value);
        wire::bytes(&mut out, 3, &entry);
    }
    wire::string(&mut out, 4, &m.unit);
    wire::string(&mut out, 5, &m.status);
    wire::optional_string(&mut out, 6, m.reason.as_ref());
    if let Some(s) = &m.stats {
        let mut stats = Vec::new();
        wire::uint(&mut stats, 1, s.samples);
        for (field, value) in
            [(2, s.mean), (3, s.p50), (4, s.p90), (5, s.p99), (6, s.p999), (7, s.ci95_low), (8, s.ci95_high)]
        {
            wire::double(&mut stats, field, value);
        }
        wire::bytes(&mut out, 7, &stats);
    }
    if let Some(f) = &m.floor {
        let mut floor = Vec::new();
        wire::string(&mut floor, 1, &f.name);
        wire::double(&mut floor, 2, f.value);
        wire::bytes(&mut out, 8, &floor);
    }
    out
}

/// The message as its top-level fields, each encoded on its own (so field boundaries are known).
fn encode_fields(run: &pb::RunUpload) -> Vec<Vec<u8>> {
    let mut fields = Vec::new();
    let mut one = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut out = Vec::new();
        f(&mut out);
        if !out.is_empty() {
            fields.push(out);
        }
    };
    one(&|o| wire::string(o, 1, &run.run_id));
    one(&|o| wire::string(o, 2, &run.agent_version));
    one(&|o| wire::int(o, 3, run.started_at_ms));
    one(&|o| wire::int(o, 4, run.finished_at_ms));
    if let Some(node) = &run.node {
        one(&|o| wire::bytes(o, 5, &encode_node(node)));
    }
    for m in &run.measurements {
        one(&|o| wire::bytes(o, 6, &encode_measurement(m)));
    }
    fields
}

fn encode(run: &pb::RunUpload) -> Vec<u8> {
    encode_fields(run).concat()
}

/// The valid message's encoding with the top-level field `number` replaced by `raw` bytes
/// (key included), or with `raw` appended when the message has no such field.
fn with_field(run: &pb::RunUpload, number: u64, raw: &[u8]) -> Vec<u8> {
    let fields = encode_fields(run);
    let mut out = Vec::new();
    let mut replaced = false;
    for field in fields {
        let tag = u64::from(field[0] >> 3);
        if tag == number && !replaced {
            out.extend_from_slice(raw);
            replaced = true;
        } else {
            out.extend_from_slice(&field);
        }
    }
    if !replaced {
        out.extend_from_slice(raw);
    }
    out
}

/// Where a text field of `T` is.
type TextOf<T> = fn(&mut T) -> &mut String;
/// Where a number field of `T` is.
type NumberOf<T> = fn(&mut T) -> &mut f64;

fn node(run: &mut pb::RunUpload) -> &mut pb::Node {
    run.node.as_mut().expect("a node")
}

fn typed_cases() -> Vec<GrpcCase> {
    let base = base_pb();
    let mut cases = Vec::new();
    let mut add = |group: &'static str, name: String, mutate: &dyn Fn(&mut pb::RunUpload)| {
        let mut run = base.clone();
        mutate(&mut run);
        cases.push(GrpcCase {
            group,
            name,
            auth: Auth::Agent,
            payload: GrpcPayload::Typed(Box::new(run)),
            expect: GRPC_CONTENT,
        });
    };

    for (what, id) in [
        ("empty", String::new()),
        ("not a UUID", "not-a-uuid".into()),
        ("nil", "00000000-0000-0000-0000-000000000000".into()),
        ("35 characters", "67e55044-10b1-426f-9247-bb680e5fe0c".into()),
        ("UUID with NUL", "67e55044-10b1-426f-9247-bb680e5fe0c8\u{0}".into()),
        ("UUID with ESC", "\u{1b}67e55044-10b1-426f-9247-bb680e5fe0c8".into()),
        ("script injection", INJECTIONS[0].into()),
        ("formula injection", INJECTIONS[1].into()),
        ("SQL injection", INJECTIONS[2].into()),
    ] {
        add("gRPC run_id", format!("run_id = {what}"), &|r| r.run_id = id.clone());
    }
    let texts: [(&str, TextOf<pb::RunUpload>, bool); 10] = [
        ("agent_version", |r| &mut r.agent_version, true),
        ("node.node_id", |r| &mut r.node.as_mut().unwrap().node_id, true),
        ("node.hostname", |r| &mut r.node.as_mut().unwrap().hostname, true),
        ("node.cpu_model", |r| &mut r.node.as_mut().unwrap().cpu_model, false),
        ("node.kernel", |r| &mut r.node.as_mut().unwrap().kernel, false),
        ("node.gpus[0].name", |r| &mut r.node.as_mut().unwrap().gpus[0].name, true),
        ("measurements[0].case", |r| &mut r.measurements[0].case, true),
        ("measurements[3].floor.name", |r| &mut r.measurements[3].floor.as_mut().unwrap().name, true),
        ("measurements[4].reason", |r| r.measurements[4].reason.as_mut().unwrap(), true),
        ("node.instance_type", |r| r.node.as_mut().unwrap().instance_type.as_mut().unwrap(), true),
    ];
    for (field, at, required) in texts {
        let mut values: Vec<(&str, String)> = control_strings().into_iter().take(4).collect();
        values.push(("257 bytes", "a".repeat(257)));
        if required {
            values.push(("empty", String::new()));
            values.push(("blank", " \t".into()));
        }
        for (what, value) in values {
            add("gRPC text", format!("{field} = {what}"), &|r| *at(r) = value.clone());
        }
    }
    add("gRPC text", "parameter key empty".into(), &|r| {
        r.measurements[0].parameters.insert(String::new(), "1".into());
    });
    add("gRPC text", "parameter key with NUL".into(), &|r| {
        r.measurements[0].parameters.insert("k\u{0}".into(), "1".into());
    });
    add("gRPC text", "parameter value with ESC".into(), &|r| {
        r.measurements[0].parameters.insert("threads".into(), "\u{1b}[2J".into());
    });
    add("gRPC text", "parameter value of 257 bytes".into(), &|r| {
        r.measurements[0].parameters.insert("threads".into(), "1".repeat(257));
    });

    for (what, started, finished) in [
        ("started_at_ms = 0", 0, 1_796_000_005_000),
        ("started_at_ms = -1", -1, 1_796_000_005_000),
        ("started_at_ms = i64::MIN", i64::MIN, 1_796_000_005_000),
        ("started_at_ms in 1999 (a partition per month back to 1970)", 946_684_799_999, 1_796_000_005_000),
        ("finished before started", 1_796_000_000_000, 1_795_999_999_999),
        ("finished_at_ms = 0", 1_796_000_000_000, 0),
        ("finished_at_ms = i64::MIN", 1_796_000_000_000, i64::MIN),
    ] {
        add("gRPC numbers", what.into(), &|r| {
            r.started_at_ms = started;
            r.finished_at_ms = finished;
        });
    }
    add("gRPC numbers", "node.cpu_cores = 0".into(), &|r| node(r).cpu_cores = 0);
    add("gRPC numbers", "node.memory_bytes = 0".into(), &|r| node(r).memory_bytes = 0);
    add("gRPC numbers", "node.memory_bytes = u64::MAX (no BIGINT holds it)".into(), &|r| {
        node(r).memory_bytes = u64::MAX
    });
    for (what, price) in [("NaN", f64::NAN), ("+inf", f64::INFINITY), ("-inf", f64::NEG_INFINITY), ("-1", -1.0)] {
        add("gRPC numbers", format!("node.hourly_usd = {what}"), &|r| node(r).hourly_usd = Some(price));
    }
    add("gRPC numbers", "stats.samples = 0".into(), &|r| r.measurements[0].stats.as_mut().unwrap().samples = 0);
    add("gRPC numbers", "stats.samples = 2^63".into(), &|r| {
        r.measurements[0].stats.as_mut().unwrap().samples = 1 << 63
    });
    let stat_fields: [(&str, NumberOf<pb::Stats>); 7] = [
        ("mean", |s| &mut s.mean),
        ("p50", |s| &mut s.p50),
        ("p90", |s| &mut s.p90),
        ("p99", |s| &mut s.p99),
        ("p999", |s| &mut s.p999),
        ("ci95_low", |s| &mut s.ci95_low),
        ("ci95_high", |s| &mut s.ci95_high),
    ];
    for (name, at) in stat_fields {
        for (what, value) in [("NaN", f64::NAN), ("+inf", f64::INFINITY), ("-inf", f64::NEG_INFINITY)] {
            add("gRPC numbers", format!("stats.{name} = {what}"), &|r| {
                *at(r.measurements[0].stats.as_mut().unwrap()) = value
            });
        }
    }
    add("gRPC numbers", "stats.p90 below p50".into(), &|r| r.measurements[0].stats.as_mut().unwrap().p90 = -1.0);
    add("gRPC numbers", "stats.ci95_low above ci95_high".into(), &|r| {
        r.measurements[0].stats.as_mut().unwrap().ci95_low = 1e300;
    });
    for (what, value) in [("NaN", f64::NAN), ("+inf", f64::INFINITY)] {
        add("gRPC numbers", format!("floor.value = {what}"), &|r| {
            r.measurements[3].floor.as_mut().unwrap().value = value
        });
    }

    // The proto has no enum numbers: suite, unit and status are strings from closed sets.
    let enums: [(&str, TextOf<pb::Measurement>); 3] =
        [("suite", |m| &mut m.suite), ("unit", |m| &mut m.unit), ("status", |m| &mut m.status)];
    for (name, at) in enums {
        let mut values: Vec<(&str, String)> = vec![
            ("empty", String::new()),
            ("unknown", "warp".into()),
            ("upper case", at(&mut base.measurements[0].clone()).to_uppercase()),
            ("with NUL", format!("{}\u{0}", at(&mut base.measurements[0].clone()))),
            ("a number", "3".into()),
        ];
        for (i, injection) in INJECTIONS.iter().enumerate() {
            values.push((["script injection", "formula injection", "SQL injection"][i], (*injection).into()));
        }
        for (what, value) in values {
            add("gRPC closed sets", format!("measurements[1].{name} = {what}"), &|r| {
                *at(&mut r.measurements[1]) = value.clone()
            });
        }
    }

    add("gRPC structure", "no node".into(), &|r| r.node = None);
    add("gRPC structure", "no measurements".into(), &|r| r.measurements.clear());
    add("gRPC structure", "ok without stats".into(), &|r| r.measurements[0].stats = None);
    add("gRPC structure", "skipped with stats".into(), &|r| {
        r.measurements[4].stats = Some(pb::Stats { samples: 1, ..Default::default() })
    });
    add("gRPC structure", "skipped without reason".into(), &|r| r.measurements[4].reason = None);
    add("gRPC structure", "an empty measurement".into(), &|r| r.measurements.push(pb::Measurement::default()));
    add("gRPC structure", "instance_type present but empty".into(), &|r| node(r).instance_type = Some(String::new()));
    add("gRPC limits", format!("{} measurements", model::wire::validate::MAX_MEASUREMENTS + 1), &|r| {
        let m = r.measurements[0].clone();
        r.measurements = vec![m; model::wire::validate::MAX_MEASUREMENTS + 1];
    });
    add("gRPC limits", format!("{} GPUs", model::wire::validate::MAX_GPUS + 1), &|r| {
        let g = node(r).gpus[0].clone();
        node(r).gpus = vec![g; model::wire::validate::MAX_GPUS + 1];
    });
    add("gRPC limits", format!("{} parameters", model::wire::validate::MAX_PARAMETERS + 1), &|r| {
        r.measurements[0].parameters =
            (0..=model::wire::validate::MAX_PARAMETERS).map(|i| (format!("k{i}"), "v".into())).collect();
    });
    cases
}

fn raw_grpc_cases(people: &People) -> Vec<GrpcCase> {
    let base = base_pb();
    let valid = encode(&base);
    let mut cases = Vec::new();
    let mut add = |group: &'static str,
                   name: String,
                   body: Vec<u8>,
                   headers: Vec<(&'static str, &'static str)>,
                   auth: Auth,
                   expect: &'static [Code]| {
        cases.push(GrpcCase { group, name, auth, payload: GrpcPayload::Body { body, headers }, expect });
    };
    let mut message = |group: &'static str, name: &str, bytes: Vec<u8>| {
        add(group, name.to_string(), whole_frame(&bytes), vec![], Auth::Agent, GRPC_CONTENT);
    };

    // Not protobuf, or protobuf that breaks off.
    for (name, bytes) in [
        ("eight 0xff bytes", vec![0xff; 8]),
        ("key with no value", vec![0x18]),
        ("truncated varint value", vec![0x18, 0xff]),
        ("11-byte varint", vec![0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]),
        ("truncated varint key", vec![0xff]),
        ("string length past the end", vec![0x0a, 0x10, b'a']),
        ("string length 2^35", vec![0x0a, 0xff, 0xff, 0xff, 0xff, 0x7f, b'a']),
        ("string length 2^63", vec![0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]),
        ("node length past the end", vec![0x2a, 0x05, 0x0a, 0x10]),
        ("measurement length past the end", vec![0x32, 0x7f, 0x0a]),
        ("field number 0", vec![0x00, 0x01]),
        ("wire type 6", vec![0x0e, 0x01]),
        ("wire type 7", vec![0x0f, 0x01]),
        ("start group on run_id", vec![0x0b, 0x0c]),
        ("end group without start", vec![0x0c]),
        ("unterminated group of an unknown field", vec![0x7b, 0x08, 0x01]),
        ("fixed64 cut short", vec![0x19, 0x01, 0x02]),
        ("fixed32 cut short", vec![0x1d, 0x01]),
        ("a JSON run", serde_json::to_vec(&base_json()).unwrap()),
        ("text 'hello'", b"hello".to_vec()),
    ] {
        message("gRPC raw: not protobuf", name, bytes);
    }

    // The right fields with the wrong wire types.
    for (name, number, raw) in [
        ("run_id as a varint", 1, vec![0x08, 0x01]),
        ("agent_version as fixed64", 2, vec![0x11, 1, 2, 3, 4, 5, 6, 7, 8]),
        ("started_at_ms as a string", 3, vec![0x1a, 0x01, b'1']),
        ("finished_at_ms as fixed32", 4, vec![0x25, 1, 2, 3, 4]),
        ("node as a varint", 5, vec![0x28, 0x01]),
        ("measurements as fixed64", 6, vec![0x31, 1, 2, 3, 4, 5, 6, 7, 8]),
    ] {
        message("gRPC raw: wrong wire type", name, with_field(&base, number, &raw));
    }
    let mut measurement = encode_measurement(&base.measurements[0]);
    measurement.splice(0..0, [0x08, 0x01]); // suite (1) as a varint before the real one
    let mut field = Vec::new();
    wire::bytes(&mut field, 6, &measurement);
    message(
        "gRPC raw: wrong wire type",
        "measurement.suite as a varint (an 'enum number')",
        with_field(&base, 6, &field),
    );
    let mut stats_as_string = encode_measurement(&base.measurements[0]);
    wire::bytes(&mut stats_as_string, 7, b"fast");
    let mut field = Vec::new();
    wire::bytes(&mut field, 6, &stats_as_string);
    message("gRPC raw: wrong wire type", "measurement.stats holding text", with_field(&base, 6, &field));

    // Strings that are not UTF-8 (same length as the marker they replace, so lengths stay right).
    for (name, field, bytes) in [
        ("run_id", "run_id", &b"\xff\xfe"[..]),
        ("node.hostname", "hostname", b"\xc0\xaf"),
        ("measurement.suite", "suite", b"\xed\xa0\x80"),
        ("parameter key", "param", b"\xe2\x82"),
    ] {
        let mut run = base.clone();
        let marker = "zz".repeat(4);
        match field {
            "run_id" => run.run_id = marker.clone(),
            "hostname" => run.node.as_mut().unwrap().hostname = marker.clone(),
            "suite" => run.measurements[0].suite = marker.clone(),
            _ => {
                run.measurements[0].parameters.insert(marker.clone(), "1".into());
            }
        }
        let encoded = encode(&run);
        let mut replacement = bytes.to_vec();
        replacement.resize(marker.len(), b'z');
        message(
            "gRPC raw: not UTF-8",
            &format!("{name} with bytes {bytes:02x?}"),
            replace_once(&encoded, marker.as_bytes(), &replacement),
        );
    }

    // The valid message cut anywhere but between two top-level fields (a cut there can leave a
    // valid run with fewer measurements).
    let mut boundaries = std::collections::BTreeSet::new();
    let mut offset = 0;
    for field in encode_fields(&base) {
        offset += field.len();
        boundaries.insert(offset);
    }
    let step = (valid.len() / 40).max(1);
    for cut in (1..valid.len()).step_by(step).filter(|c| !boundaries.contains(c)) {
        message(
            "gRPC raw: truncated protobuf",
            &format!("first {cut} of {} bytes", valid.len()),
            valid[..cut].to_vec(),
        );
    }

    // Repeated fields past their limits, counted on the wire before decoding.
    message(
        "gRPC raw: limits",
        "10 001 empty measurements",
        [0x32u8, 0x00].repeat(model::wire::validate::MAX_MEASUREMENTS + 1),
    );
    message("gRPC raw: limits", "1 million empty measurements", [0x32u8, 0x00].repeat(1_000_000));
    let mut node = Vec::new();
    for _ in 0..=model::wire::validate::MAX_GPUS {
        node.extend_from_slice(&[0x4a, 0x00]);
    }
    let mut field = Vec::new();
    wire::bytes(&mut field, 5, &node);
    message("gRPC raw: limits", "65 empty GPUs", field);
    let mut entry = Vec::new();
    for _ in 0..=model::wire::validate::MAX_PARAMETERS {
        entry.extend_from_slice(&[0x1a, 0x00]);
    }
    let mut field = Vec::new();
    wire::bytes(&mut field, 6, &entry);
    message("gRPC raw: limits", "65 empty parameters", field);
    let mut field = Vec::new();
    wire::bytes(&mut field, 2, &vec![b'v'; (16 << 20) + 1]);
    message("gRPC raw: limits", "a 16 MiB + 1 byte agent_version", field);
    add(
        "gRPC raw: limits",
        "frame declaring 16 MiB + 1".into(),
        frame(0, (16 << 20) + 1, &[0; 1024]),
        vec![],
        Auth::Agent,
        GRPC_CONTENT,
    );
    add(
        "gRPC raw: limits",
        "frame declaring 4 GiB - 1".into(),
        frame(0, u32::MAX, &[0; 16]),
        vec![],
        Auth::Agent,
        GRPC_CONTENT,
    );

    // Frames that are not well-formed gRPC.
    let group = "gRPC raw: frame";
    add(group, "no frame at all (empty body)".into(), Vec::new(), vec![], Auth::Agent, GRPC_CONTENT);
    add(group, "three bytes of a frame header".into(), vec![0, 0, 0], vec![], Auth::Agent, GRPC_CONTENT);
    add(
        group,
        "frame declares 100 bytes, 10 sent".into(),
        frame(0, 100, &valid[..10]),
        vec![],
        Auth::Agent,
        GRPC_CONTENT,
    );
    add(
        group,
        "frame declares one byte more than sent".into(),
        frame(0, u32::try_from(valid.len() + 1).unwrap(), &valid),
        vec![],
        Auth::Agent,
        GRPC_CONTENT,
    );
    add(
        group,
        "compressed flag set, no grpc-encoding".into(),
        frame(1, u32::try_from(valid.len()).unwrap(), &valid),
        vec![],
        Auth::Agent,
        GRPC_CONTENT,
    );
    add(
        group,
        "compressed flag set, grpc-encoding: gzip".into(),
        frame(1, 8, &[0x1f, 0x8b, 8, 0, 0, 0, 0, 0]),
        vec![("grpc-encoding", "gzip")],
        Auth::Agent,
        GRPC_CONTENT,
    );
    add(
        group,
        "compression flag 2".into(),
        frame(2, u32::try_from(valid.len()).unwrap(), &valid),
        vec![],
        Auth::Agent,
        GRPC_CONTENT,
    );
    add(group, "compression flag 0xff".into(), frame(0xff, 3, &[0xff; 3]), vec![], Auth::Agent, GRPC_CONTENT);

    // Without an agent's token: refused before a byte is decoded.
    let group = "gRPC auth";
    let garbage = frame(0, 3, &[0xff; 3]);
    let huge = [0x32u8, 0x00].repeat(model::wire::validate::MAX_MEASUREMENTS + 1);
    for (name, auth, body) in [
        ("no token, garbage", Auth::Nothing, garbage.clone()),
        ("no token, 10 001 measurements", Auth::Nothing, whole_frame(&huge)),
        ("no token, frame declaring 16 MiB + 1", Auth::Nothing, frame(0, (16 << 20) + 1, &[0; 64])),
        ("no token, compressed flag", Auth::Nothing, frame(1, 3, &[0xff; 3])),
        ("no token, the valid run", Auth::Nothing, whole_frame(&valid)),
        ("unknown token, the valid run", Auth::Header("Bearer hr_agent_nope".into()), whole_frame(&valid)),
        ("Basic auth, the valid run", Auth::Header("Basic YWdlbnQ6c2VjcmV0".into()), whole_frame(&valid)),
        ("revoked API token, garbage", Auth::Header(format!("Bearer {}", people.revoked)), garbage.clone()),
        ("expired API token, the valid run", Auth::Header(format!("Bearer {}", people.expired)), whole_frame(&valid)),
        ("admin session cookie, the valid run", Auth::Cookie(people.admin_session.clone()), whole_frame(&valid)),
    ] {
        add(group, name.into(), body, vec![], auth, GRPC_UNAUTHENTICATED);
    }
    for (role, token) in &people.tokens {
        add(
            group,
            format!("{} API token, the valid run", role.as_str()),
            whole_frame(&valid),
            vec![],
            Auth::Header(format!("Bearer {token}")),
            GRPC_FORBIDDEN,
        );
    }
    cases
}

fn typed_auth_cases(agent: &str, people: &People) -> Vec<GrpcCase> {
    let valid = Box::new(base_pb());
    let mut cases = Vec::new();
    for (name, auth, expect) in [
        ("typed: no token", Auth::Nothing, GRPC_UNAUTHENTICATED),
        ("typed: unknown token", Auth::Header("Bearer hr_agent_nope".into()), GRPC_UNAUTHENTICATED),
        ("typed: agent token without 'Bearer '", Auth::Header(agent.to_string()), GRPC_UNAUTHENTICATED),
        ("typed: revoked API token", Auth::Header(format!("Bearer {}", people.revoked)), GRPC_UNAUTHENTICATED),
        ("typed: admin session cookie", Auth::Cookie(people.admin_session.clone()), GRPC_UNAUTHENTICATED),
        ("typed: admin API token", Auth::Header(format!("Bearer {}", people.tokens[3].1)), GRPC_FORBIDDEN),
    ] {
        cases.push(GrpcCase {
            group: "gRPC auth",
            name: name.into(),
            auth,
            payload: GrpcPayload::Typed(valid.clone()),
            expect,
        });
    }
    cases
}

// ---------------------------------------------------------------------------------------------
// Sending, and what came back.
// ---------------------------------------------------------------------------------------------

/// People's credentials the auth cases use.
struct People {
    tokens: Vec<(Role, String)>,
    revoked: String,
    expired: String,
    admin_session: String,
}

async fn people(app: &TestApp) -> People {
    let mut tokens = Vec::new();
    for role in Role::ALL {
        tokens.push((role, app.user_token(role).await));
    }
    headroom_server::admin::create_user(&app.store, "revoked-admin", Role::Admin, None).await.unwrap();
    let (revoked, id) =
        headroom_server::admin::create_expiring_api_token(&app.store, "revoked-admin", None).await.unwrap();
    assert!(app.store.revoke_api_token(&id).await.unwrap());
    let user = app.store.user_by_name("revoked-admin").await.unwrap().unwrap();
    let expired = "hr_api_expired_hostile".to_string();
    let hash = headroom_server::auth::hash_token(&expired);
    app.store.create_api_token(&user.id, &hash, Some(headroom_server::store::now_ms() - 1)).await.unwrap();
    People { tokens, revoked, expired, admin_session: app.session(Role::Admin).await }
}

/// What one case got.
struct Outcome {
    /// How the summary shows it, e.g. `422` or `InvalidArgument`.
    label: String,
    /// Whether it is one of the case's expected answers.
    expected: bool,
    /// A content refusal without `headroom-refusal: content`.
    unsigned: bool,
    detail: String,
}

fn apply_auth(mut request: reqwest::RequestBuilder, auth: &Auth, agent: &str) -> reqwest::RequestBuilder {
    match auth {
        Auth::Agent => request = request.bearer_auth(agent),
        Auth::Header(value) => request = request.header("authorization", value),
        Auth::Cookie(value) => request = request.header("cookie", value),
        Auth::Nothing => {}
    }
    request
}

async fn send_http(app: &TestApp, agent: &str, case: &HttpCase) -> Outcome {
    let (status, signed, detail) = match &case.payload {
        Payload::Bytes(body) => {
            let mut request = apply_auth(app.http.post(app.url(RUNS)), &case.auth, agent).body(body.clone());
            if let Some(content_type) = &case.content_type {
                request = request.header("content-type", content_type);
            }
            match request.send().await {
                Ok(response) => {
                    let status = response.status().as_u16();
                    let signed = response.headers().get("headroom-refusal").is_some_and(|v| v == "content");
                    let text = response.text().await.unwrap_or_default();
                    (Some(status), signed, text.chars().take(200).collect())
                }
                Err(err) => (None, false, format!("no answer: {err}")),
            }
        }
        Payload::Chunked(size) => chunked_upload(app, agent, case, *size).await,
    };
    let expected = status.is_some_and(|s| case.expect.contains(&s));
    let content_refusal = status.is_some_and(|s| CONTENT.contains(&s));
    Outcome {
        label: status.map_or_else(|| "no answer".into(), |s| s.to_string()),
        expected,
        unsigned: content_refusal && !signed,
        detail,
    }
}

/// Streams `size` bytes chunked (no Content-Length) and reads the answer's status line.
async fn chunked_upload(app: &TestApp, agent: &str, case: &HttpCase, size: usize) -> (Option<u16>, bool, String) {
    let mut stream = tokio::net::TcpStream::connect(app.addr).await.unwrap();
    let auth = match &case.auth {
        Auth::Agent => format!("Authorization: Bearer {agent}\r\n"),
        Auth::Header(value) => format!("Authorization: {value}\r\n"),
        Auth::Cookie(value) => format!("Cookie: {value}\r\n"),
        Auth::Nothing => String::new(),
    };
    let head = format!(
        "POST {RUNS} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n{auth}Transfer-Encoding: chunked\r\n\r\n",
        app.addr
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let chunk = [format!("{:x}\r\n", 64 << 10).into_bytes(), vec![b' '; 64 << 10], b"\r\n".to_vec()].concat();
    for _ in 0..size / (64 << 10) {
        if stream.write_all(&chunk).await.is_err() {
            break;
        }
    }
    let _ = stream.write_all(b"0\r\n\r\n").await;
    let mut buf = vec![0u8; 4096];
    let n = match tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf)).await {
        Ok(Ok(n)) => n,
        _ => 0,
    };
    let answer = String::from_utf8_lossy(&buf[..n]).to_string();
    let status = answer.strip_prefix("HTTP/1.1 ").and_then(|rest| rest.get(..3)).and_then(|s| s.parse().ok());
    let signed = answer.to_ascii_lowercase().contains("headroom-refusal: content");
    (status, signed, answer.lines().next().unwrap_or("no answer").to_string())
}

async fn send_grpc(
    app: &TestApp,
    agent: &str,
    h2: &reqwest::Client,
    client: &IngestClient<Channel>,
    case: &GrpcCase,
) -> Outcome {
    let (code, signed, detail) = match &case.payload {
        GrpcPayload::Typed(run) => {
            let mut request = tonic::Request::new((**run).clone());
            let metadata = request.metadata_mut();
            match &case.auth {
                Auth::Agent => {
                    metadata.insert("authorization", format!("Bearer {agent}").parse().unwrap());
                }
                Auth::Header(value) => {
                    metadata.insert("authorization", value.parse().unwrap());
                }
                Auth::Cookie(value) => {
                    metadata.insert("cookie", value.parse().unwrap());
                }
                Auth::Nothing => {}
            }
            match client.clone().upload_run(request).await {
                Ok(ack) => (Ok(Code::Ok), false, format!("{:?}", ack.into_inner())),
                Err(status) => {
                    let signed = status.metadata().get("headroom-refusal").is_some_and(|v| v == "content");
                    (Ok(status.code()), signed, status.message().chars().take(200).collect())
                }
            }
        }
        GrpcPayload::Body { body, headers } => {
            let mut request = h2
                .post(app.url(GRPC_PATH))
                .header("content-type", "application/grpc")
                .header("te", "trailers")
                .body(body.clone());
            for (name, value) in headers {
                request = request.header(*name, *value);
            }
            match apply_auth(request, &case.auth, agent).send().await {
                Err(err) => (Err(format!("no answer: {err}")), false, String::new()),
                Ok(response) => {
                    let http = response.status();
                    let headers = response.headers().clone();
                    let body = response.bytes().await.unwrap_or_default();
                    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
                    let signed = text("headroom-refusal").is_some_and(|v| v == "content");
                    let message = text("grpc-message").unwrap_or_default();
                    match text("grpc-status").and_then(|s| s.parse::<i32>().ok()) {
                        Some(code) => (Ok(Code::from_i32(code)), signed, message),
                        None if http.is_success() && !body.is_empty() => {
                            (Ok(Code::Ok), false, format!("a {}-byte answer, status in the trailers", body.len()))
                        }
                        None => (Err(format!("HTTP {http} without grpc-status")), false, message),
                    }
                }
            }
        }
    };
    match code {
        Ok(code) => Outcome {
            label: format!("{code:?}"),
            expected: case.expect.contains(&code),
            unsigned: GRPC_CONTENT.contains(&code) && !signed,
            detail,
        },
        Err(label) => Outcome { label, expected: false, unsigned: false, detail },
    }
}

/// How many cases a group has, and how many got each answer.
type GroupTally = (usize, BTreeMap<String, usize>);

/// Cases and answers per group, and every unexpected answer.
#[derive(Default)]
struct Tally {
    groups: BTreeMap<(&'static str, &'static str), GroupTally>,
    wrong: Vec<String>,
    unsigned: Vec<String>,
    total: usize,
}

impl Tally {
    fn record(&mut self, backend: &str, door: &'static str, group: &'static str, name: &str, outcome: Outcome) {
        let entry = self.groups.entry((door, group)).or_default();
        entry.0 += 1;
        *entry.1.entry(outcome.label.clone()).or_default() += 1;
        self.total += 1;
        let line = format!("{backend} {door} [{group}] {name}: {} — {}", outcome.label, outcome.detail);
        if !outcome.expected {
            self.wrong.push(line.clone());
        }
        if outcome.unsigned {
            self.unsigned.push(line);
        }
    }

    fn print(&self, backend: &str) {
        eprintln!("\nhostile-input corpus on {backend}: {} cases", self.total);
        eprintln!("{:<5} {:<40} {:>6}  answers", "door", "group", "cases");
        for ((door, group), (count, answers)) in &self.groups {
            let answers: Vec<String> = answers.iter().map(|(label, n)| format!("{label}×{n}")).collect();
            eprintln!("{door:<5} {group:<40} {count:>6}  {}", answers.join(", "));
        }
        for line in &self.wrong {
            eprintln!("UNEXPECTED: {line}");
        }
        for line in &self.unsigned {
            eprintln!("UNSIGNED REFUSAL: {line}");
        }
    }
}

#[tokio::test]
async fn the_hostile_corpus_is_refused_through_both_doors_and_nothing_is_stored() {
    let started = Instant::now();
    let mut http_cases = json_corpus();
    http_cases.extend(raw_corpus());
    let grpc_content: Vec<GrpcCase> = typed_cases();
    let mut failures = Vec::new();
    for db in databases().await {
        let app = spawn(&db).await;
        let agent = app.agent_token("agent-hostile").await;
        let people = people(&app).await;
        let mut tally = Tally::default();
        for case in http_cases.iter().chain(&auth_corpus(&agent, &people)) {
            let outcome = send_http(&app, &agent, case).await;
            tally.record(app.backend, "HTTP", case.group, &case.name, outcome);
        }
        let h2 = reqwest::Client::builder().http2_prior_knowledge().build().unwrap();
        let client = IngestClient::connect(app.base.clone()).await.expect("gRPC connect");
        let raw = raw_grpc_cases(&people);
        let typed_auth = typed_auth_cases(&agent, &people);
        for case in grpc_content.iter().chain(&raw).chain(&typed_auth) {
            let outcome = send_grpc(&app, &agent, &h2, &client, case).await;
            tally.record(app.backend, "gRPC", case.group, &case.name, outcome);
        }
        tally.print(app.backend);
        let stored = app.counts().await;

        // The unmutated run goes through both doors: the corpus was one change from valid.
        let mut valid = base_json();
        valid["run_id"] = json!(uuid::Uuid::new_v4());
        let response = app.http.post(app.url(RUNS)).bearer_auth(&agent).header("content-type", "application/json");
        let response = response.body(valid.to_string()).send().await.unwrap();
        assert_eq!(response.status(), reqwest::StatusCode::CREATED, "{}: the valid JSON run was refused", app.backend);
        let mut run = base_pb();
        run.run_id = uuid::Uuid::new_v4().to_string();
        let probe = GrpcCase {
            group: "valid",
            name: "hand-encoded valid run".into(),
            auth: Auth::Agent,
            payload: GrpcPayload::Body { body: whole_frame(&encode(&run)), headers: vec![] },
            expect: &[Code::Ok],
        };
        let outcome = send_grpc(&app, &agent, &h2, &client, &probe).await;
        assert!(
            outcome.expected,
            "{}: the hand-encoded valid run was refused: {} {}",
            app.backend, outcome.label, outcome.detail
        );
        let mut run = base_pb();
        run.run_id = uuid::Uuid::new_v4().to_string();
        let typed = GrpcCase { payload: GrpcPayload::Typed(Box::new(run)), ..probe };
        let outcome = send_grpc(&app, &agent, &h2, &client, &typed).await;
        assert!(
            outcome.expected,
            "{}: the valid gRPC run was refused: {} {}",
            app.backend, outcome.label, outcome.detail
        );
        assert_eq!(app.counts().await, (stored.0 + 3, 1), "{}: the three valid runs are stored", app.backend);

        assert!(tally.total >= 300, "{}: only {} cases", app.backend, tally.total);
        if stored != (0, 0) {
            failures.push(format!("{}: the corpus left {} runs and {} nodes stored", app.backend, stored.0, stored.1));
        }
        failures.extend(tally.wrong.iter().map(|line| format!("unexpected answer: {line}")));
        failures.extend(tally.unsigned.iter().map(|line| format!("refusal without headroom-refusal: content: {line}")));
        app.stop().await;
        db.drop_database().await;
    }
    eprintln!("hostile corpus took {:.1} s", started.elapsed().as_secs_f64());
    assert!(
        failures.is_empty(),
        "{} hostile cases were not refused as they should be:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The README's ingest limits ("256 bytes per text field, no control characters but tab and line
/// breaks") for the GPU's driver and CUDA versions, which `model::wire::validate` does not check.
#[tokio::test]
async fn gpu_version_texts_obey_the_documented_text_limits() {
    let mut failures = Vec::new();
    for db in databases().await {
        let app = spawn(&db).await;
        let agent = app.agent_token("agent-gpu-text").await;
        for field in ["driver_version", "cuda_version"] {
            for (what, value) in control_strings().into_iter().take(3).chain(long_strings().into_iter().take(1)) {
                let mut run = base_json();
                run["run_id"] = json!(uuid::Uuid::new_v4());
                run["node"]["gpus"][0][field] = json!(value);
                let (status, body) = common::post(&app, Some(&agent), RUNS, run.to_string()).await;
                if !CONTENT.contains(&status.as_u16()) {
                    failures.push(format!("{}: HTTP node.gpus[0].{field} = {what}: {status} {body}", app.backend));
                }
            }
        }
        let stored = app.counts().await;
        if stored != (0, 0) {
            failures.push(format!("{}: {} runs stored", app.backend, stored.0));
        }
        app.stop().await;
        db.drop_database().await;
    }
    assert!(
        failures.is_empty(),
        "GPU version texts past the documented limits were accepted:\n{}",
        failures.join("\n")
    );
}
