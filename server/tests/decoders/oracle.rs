//! What must hold for every input of the three decoders, whatever its bytes. Shared by the
//! property tests (`server/tests/decoders/main.rs`) and the fuzz targets (`fuzz/fuzz_targets/`),
//! so both check the same things; each function panics when something does not hold.

use std::collections::BTreeSet;

use headroom_server::error::ApiError;
use headroom_server::ingest::decode_json;
use headroom_server::prices::{self, COLUMNS, PURCHASE_OPTIONS, PriceRow};
use model::RunUpload;

/// JSON ingest: a refusal is 400 or 422; an accepted run is valid and comes through both doors
/// again unchanged.
pub fn json(bytes: &[u8]) {
    match decode_json(bytes) {
        Ok(run) => accepted(&run),
        Err(ApiError::BadRequest(_) | ApiError::Unprocessable(_) | ApiError::Invalid(_)) => {}
        Err(other) => panic!("JSON ingest answered {other:?}, not a refusal of the content"),
    }
}

/// gRPC ingest: a refusal is INVALID_ARGUMENT or RESOURCE_EXHAUSTED signed as a refusal of the
/// content; an accepted run is valid and comes through both doors again unchanged.
pub fn protobuf(bytes: &[u8]) {
    match proto::decode_upload(bytes) {
        Ok(run) => accepted(&run),
        Err(status) => {
            let code = status.code();
            assert!(matches!(code, tonic::Code::InvalidArgument | tonic::Code::ResourceExhausted), "{status:?}");
            let signed = status.metadata().get(proto::codec::REFUSAL_KEY).and_then(|v| v.to_str().ok());
            assert_eq!(signed, Some("content"), "an unsigned refusal is retried by agents: {status:?}");
        }
    }
}

/// A run either door accepted.
fn accepted(run: &RunUpload) {
    assert_eq!(run.validate(), Ok(()), "a decoder accepted an invalid run: {run:?}");
    let json = serde_json::to_vec(run).expect("a run serialises");
    match decode_json(&json) {
        Ok(again) => assert_eq!(&again, run, "JSON does not round-trip"),
        Err(err) => panic!("the JSON door refuses an accepted run: {err}\n{run:?}"),
    }
    match proto::decode_upload(&proto::encode_upload(run)) {
        Ok(again) => assert_eq!(&again, run, "protobuf does not round-trip"),
        Err(status) => panic!("the gRPC door refuses an accepted run: {status:?}\n{run:?}"),
    }
}

/// Price catalog import: text that is not UTF-8 is refused before parsing (400). A rejected
/// catalog has located problems; an accepted one has valid, distinct rows and is exported as
/// CSV that imports to the same rows.
pub fn price_csv(bytes: &[u8]) {
    let Ok(text) = std::str::from_utf8(bytes) else { return };
    match prices::parse(text) {
        Ok(rows) => {
            assert!(!rows.is_empty() && rows.len() <= prices::MAX_ROWS, "{} rows", rows.len());
            let mut keys = BTreeSet::new();
            for row in &rows {
                valid_row(row);
                let key = (&row.provider, &row.instance_type, &row.purchase_option, &row.region);
                assert!(keys.insert(key), "listed twice: {row:?}");
            }
            let csv = prices::to_csv(&rows);
            assert_eq!(prices::parse(&csv), Ok(rows), "the export does not import to the same rows:\n{csv}");
        }
        Err(errors) => {
            assert!(!errors.is_empty(), "a refusal without a reason");
            for e in &errors {
                assert!(e.line >= 1 && !e.reason.is_empty(), "{e:?}");
                assert!(e.column.as_deref().is_none_or(|c| COLUMNS.contains(&c)), "{e:?}");
            }
        }
    }
}

fn valid_row(row: &PriceRow) {
    let texts = [
        Some(&row.provider),
        Some(&row.instance_type),
        row.gpu_model.as_ref(),
        Some(&row.purchase_option),
        row.region.as_ref(),
        Some(&row.source),
        Some(&row.as_of),
    ];
    for text in texts.into_iter().flatten() {
        assert!(!text.trim().is_empty(), "an empty cell in {row:?}");
        // The rule runs' text follows: no NUL (Postgres cannot store it), no control characters.
        assert!(!text.chars().any(|c| c.is_control() && !matches!(c, '\t' | '\n' | '\r')), "{row:?}");
    }
    assert!(row.gpu_count == 0 || row.gpu_model.is_some(), "{row:?}");
    assert!(row.memory_bytes != Some(0), "no memory: {row:?}");
    assert!(row.hourly_micro_usd > 0, "{row:?}");
    assert!(PURCHASE_OPTIONS.contains(&row.purchase_option.as_str()), "{row:?}");
    assert!(is_calendar_date(&row.as_of), "as_of is not a date: {row:?}");
}

/// `YYYY-MM-DD`, digits only, a day that exists, from 1970 on.
fn is_calendar_date(text: &str) -> bool {
    let b = text.as_bytes();
    let shaped = b.len() == 10
        && b.iter().enumerate().all(|(i, c)| if i == 4 || i == 7 { *c == b'-' } else { c.is_ascii_digit() });
    if !shaped {
        return false;
    }
    let num = |from: usize, to: usize| text[from..to].parse::<u32>().unwrap_or(0);
    let (y, m, d) = (num(0, 4), num(5, 7), num(8, 10));
    let leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => 0,
    };
    y >= 1970 && (1..=days).contains(&d)
}
