//! The price catalog as CSV: read with every problem located (line, column, reason) so nothing
//! is half-imported, and written back in the same shape, money exact in micro-dollars.

use std::collections::BTreeSet;

use model::money::{MicroUsd, format_usd, parse_usd};
use serde::Serialize;

use crate::csv_cell;

/// The catalog shipped with the server, loaded into an empty database (see `data/README.md`).
pub const DEFAULT_CATALOG: &str = include_str!("../data/price-catalog.csv");

/// The header every catalog CSV has, in this order.
pub const COLUMNS: [&str; 11] = [
    "provider",
    "instance_type",
    "gpu_model",
    "gpu_count",
    "vcpus",
    "memory_gib",
    "hourly_usd",
    "purchase_option",
    "region",
    "source",
    "as_of",
];

pub use model::wire::view::PURCHASE_OPTIONS;

/// Largest catalog accepted in one import.
pub const MAX_ROWS: usize = 50_000;

/// One priced instance type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct PriceRow {
    pub provider: String,
    pub instance_type: String,
    pub gpu_model: Option<String>,
    pub gpu_count: u32,
    pub vcpus: Option<u32>,
    /// Memory in bytes (the CSV says GiB).
    pub memory_bytes: Option<u64>,
    pub hourly_micro_usd: MicroUsd,
    pub purchase_option: String,
    pub region: Option<String>,
    pub source: String,
    /// `YYYY-MM-DD`.
    pub as_of: String,
}

/// Where a CSV is wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct CellError {
    /// 1-based line of the file; the header is line 1.
    pub line: u64,
    /// The column's name, or `None` for a problem with the whole line.
    pub column: Option<String>,
    pub reason: String,
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Every row, or every problem found (up to 100 of them).
pub fn parse(text: &str) -> Result<Vec<PriceRow>, Vec<CellError>> {
    let mut seen = BTreeSet::new();
    read_csv(text, &COLUMNS, MAX_ROWS, "the catalog", |line, record, errors| {
        let before = errors.len();
        let mut bad = |column: &str, reason: String| {
            errors.push(CellError { line, column: Some(column.to_string()), reason });
        };
        let cell = |c: usize| csv_cell::restore(record.get(c).unwrap_or("").trim());
        let required = |c: usize, bad: &mut dyn FnMut(&str, String)| {
            let v = cell(c);
            if v.is_empty() {
                bad(COLUMNS[c], "must not be empty".into());
            }
            v.to_string()
        };
        let optional = |c: usize| Some(cell(c).to_string()).filter(|v| !v.is_empty());
        let count = |c: usize, bad: &mut dyn FnMut(&str, String)| -> Option<u32> {
            let v = cell(c);
            if v.is_empty() {
                return None;
            }
            v.parse::<u32>().map_err(|_| bad(COLUMNS[c], format!("“{v}” is not a whole number"))).ok()
        };
        // Postgres text cannot hold NUL; other control characters only disguise a value (the
        // rule runs' text follows too).
        for c in [0, 1, 2, 8, 9] {
            if let Some(reason) = control_character(cell(c)) {
                bad(COLUMNS[c], reason);
            }
        }
        let provider = required(0, &mut bad);
        let instance_type = required(1, &mut bad);
        let gpu_model = optional(2);
        let gpu_count = match count(3, &mut bad) {
            Some(n) => n,
            None if cell(3).is_empty() => {
                bad("gpu_count", "must not be empty (0 for CPU-only)".into());
                0
            }
            None => 0,
        };
        if gpu_count > 0 && gpu_model.is_none() {
            bad("gpu_model", "must name the GPU when gpu_count is above 0".into());
        }
        let vcpus = count(4, &mut bad);
        let memory_bytes = match cell(5) {
            "" => None,
            v => match v.parse::<f64>() {
                // At least one byte: a catalog that reads back as "0" cannot be imported again.
                Ok(g) if g.is_finite() && g < 1e9 && (g * GIB).round() >= 1.0 => Some((g * GIB).round() as u64),
                _ => {
                    bad("memory_gib", format!("“{v}” is not a positive number of GiB"));
                    None
                }
            },
        };
        let hourly_micro_usd = match parse_usd(cell(6)) {
            Ok(0) => {
                bad("hourly_usd", "must be above 0".into());
                0
            }
            Ok(m) => m,
            Err(reason) => {
                bad("hourly_usd", reason);
                0
            }
        };
        let purchase_option = cell(7).to_string();
        if !PURCHASE_OPTIONS.contains(&purchase_option.as_str()) {
            bad("purchase_option", format!("“{purchase_option}” is not one of {}", PURCHASE_OPTIONS.join(", ")));
        }
        let region = optional(8);
        let source = required(9, &mut bad);
        let as_of = cell(10).to_string();
        if let Err(reason) = model::calendar::Date::parse(&as_of) {
            bad("as_of", reason);
        }
        let key = (provider.clone(), instance_type.clone(), purchase_option.clone(), region.clone());
        if errors.len() == before && !seen.insert(key) {
            errors.push(CellError {
                line,
                column: None,
                reason: format!("{provider} {instance_type} {purchase_option} in this region is listed twice"),
            });
        }
        (errors.len() == before).then_some(PriceRow {
            provider,
            instance_type,
            gpu_model,
            gpu_count,
            vcpus,
            memory_bytes,
            hourly_micro_usd,
            purchase_option,
            region,
            source,
            as_of,
        })
    })
}

/// Reads a CSV whose header is `columns`, a record at a time: a wrong header, a line that
/// cannot be read or has another number of fields is located here, and `row` reads each
/// well-formed record (its line and fields), adding its own problems, and gives the row when it
/// found none. At most 100 problems are gathered; nothing is returned unless there are none.
/// `what` names the file in its problems ("the catalog").
pub(crate) fn read_csv<T>(
    text: &str,
    columns: &[&str],
    max_rows: usize,
    what: &str,
    mut row: impl FnMut(u64, &csv::StringRecord, &mut Vec<CellError>) -> Option<T>,
) -> Result<Vec<T>, Vec<CellError>> {
    let mut reader = csv::ReaderBuilder::new().has_headers(true).flexible(true).from_reader(text.as_bytes());
    let header: Vec<String> = match reader.headers() {
        Ok(h) => h.iter().map(|c| c.trim().to_string()).collect(),
        Err(e) => return Err(vec![CellError { line: 1, column: None, reason: format!("unreadable header: {e}") }]),
    };
    header_is(&header, columns)?;
    let mut rows = Vec::new();
    let mut errors = Vec::new();
    for (i, record) in reader.records().enumerate() {
        let line = record.as_ref().ok().and_then(|r| r.position()).map(|p| p.line()).unwrap_or(i as u64 + 2);
        if errors.len() >= 100 {
            break;
        }
        match record {
            Ok(r) if r.len() == columns.len() => rows.extend(row(line, &r, &mut errors)),
            Ok(r) => {
                let reason = format!("has {} fields, the header has {}", r.len(), columns.len());
                errors.push(CellError { line, column: None, reason });
            }
            Err(e) => errors.push(CellError { line, column: None, reason: format!("unreadable line: {e}") }),
        }
    }
    if rows.len() > max_rows {
        errors.push(CellError { line: 1, column: None, reason: format!("more than {max_rows} rows") });
    }
    if rows.is_empty() && errors.is_empty() {
        errors.push(CellError { line: 2, column: None, reason: format!("{what} has no rows") });
    }
    if errors.is_empty() { Ok(rows) } else { Err(errors) }
}

/// Checks a CSV's header against the columns it must have, in order, naming what is missing
/// or unknown.
fn header_is(header: &[String], columns: &[&str]) -> Result<(), Vec<CellError>> {
    if header == columns {
        return Ok(());
    }
    let missing: Vec<&str> = columns.iter().copied().filter(|c| !header.iter().any(|h| h == c)).collect();
    let extra: Vec<&str> = header.iter().map(String::as_str).filter(|h| !columns.contains(h)).collect();
    let reason = match (missing.is_empty(), extra.is_empty()) {
        (false, _) => format!("missing column(s): {}", missing.join(", ")),
        (true, false) => format!("unknown column(s): {}", extra.join(", ")),
        (true, true) => format!("columns must be in this order: {}", columns.join(",")),
    };
    Err(vec![CellError { line: 1, column: None, reason }])
}

/// The first control character in a cell other than tab and line ends: Postgres text cannot
/// hold NUL, and the others only disguise a value.
pub(crate) fn control_character(cell: &str) -> Option<String> {
    cell.chars()
        .find(|ch| ch.is_control() && !matches!(ch, '\t' | '\n' | '\r'))
        .map(|ch| format!("must not contain control characters (found U+{:04X})", ch as u32))
}

/// The catalog as CSV, the same shape [`parse`] reads.
pub fn to_csv(rows: &[PriceRow]) -> String {
    let mut writer = csv::Writer::from_writer(Vec::new());
    let _ = writer.write_record(COLUMNS);
    for r in rows {
        let memory = r.memory_bytes.map(gib).unwrap_or_default();
        let text = |t: &str| csv_cell::neutral(t).into_owned();
        let _ = writer.write_record([
            text(&r.provider),
            text(&r.instance_type),
            text(r.gpu_model.as_deref().unwrap_or("")),
            r.gpu_count.to_string(),
            r.vcpus.map(|v| v.to_string()).unwrap_or_default(),
            memory,
            format_usd(r.hourly_micro_usd),
            text(&r.purchase_option),
            text(r.region.as_deref().unwrap_or("")),
            text(&r.source),
            text(&r.as_of),
        ]);
    }
    String::from_utf8(writer.into_inner().unwrap_or_default()).unwrap_or_default()
}

/// Bytes as GiB in the fewest decimals (three at least, trailing zeros trimmed) that [`parse`]
/// reads back as the same bytes.
fn gib(bytes: u64) -> String {
    let v = bytes as f64 / GIB;
    let reads_back = |text: &String| text.parse::<f64>().is_ok_and(|g| (g * GIB).round() as u64 == bytes);
    // `v` itself always reads back: it is `bytes` divided by a power of two, exactly.
    (3..=12).map(|decimals| trim_number(v, decimals)).find(reads_back).unwrap_or_else(|| v.to_string())
}

fn trim_number(v: f64, decimals: usize) -> String {
    let text = format!("{v:.decimals$}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_catalog_reads_and_writes_back_unchanged() {
        let rows = parse(DEFAULT_CATALOG).expect("the shipped catalog is valid");
        assert!(rows.len() >= 10);
        let g5 = rows.iter().find(|r| r.instance_type == "g5.xlarge").unwrap();
        assert_eq!(g5.hourly_micro_usd, 1_006_000);
        assert_eq!(g5.memory_bytes, Some(16 << 30));
        assert_eq!(to_csv(&rows), DEFAULT_CATALOG);
    }

    #[test]
    fn every_problem_is_located() {
        let csv = format!(
            "{}\naws,a,,0,4,16,1.5,on_demand,r,s,2026-01-01\naws,b,,x,4,16,-2,hourly,r,,2026-13-01\naws,a,,0,4,16,1.5,on_demand,r,s,2026-01-01\naws,c,T4,1\n",
            COLUMNS.join(",")
        );
        let errors = parse(&csv).unwrap_err();
        let at = |line: u64, column: &str| errors.iter().any(|e| e.line == line && e.column.as_deref() == Some(column));
        assert!(
            at(3, "gpu_count") && at(3, "hourly_usd") && at(3, "purchase_option") && at(3, "source") && at(3, "as_of"),
            "{errors:?}"
        );
        assert!(errors.iter().any(|e| e.line == 4 && e.reason.contains("twice")), "{errors:?}");
        assert!(errors.iter().any(|e| e.line == 5 && e.reason.contains("has 4 fields")), "{errors:?}");
        assert!(!errors.iter().any(|e| e.line == 2), "line 2 is fine: {errors:?}");
    }

    /// Found by the decoders' property tests (`tests/decoders`).
    #[test]
    fn what_is_imported_exports_to_the_same_rows() {
        let row = |memory: &str, provider: &str| {
            format!("{}\n{provider},x,,0,4,{memory},1.5,on_demand,r,s,2026-01-01\n", COLUMNS.join(","))
        };
        // Memory that is not a whole number of thousandths of a GiB is written as precisely as
        // it takes to read it back; memory that rounds to no bytes at all is refused.
        for memory in ["1.0001", "0.0001", "0.1", "123456789.123456"] {
            let rows = parse(&row(memory, "aws")).unwrap();
            assert_eq!(parse(&to_csv(&rows)), Ok(rows), "{memory}");
        }
        assert_eq!(to_csv(&parse(&row("0.1", "aws")).unwrap()).lines().nth(1).unwrap().split(',').nth(5), Some("0.1"));
        let errors = parse(&row("0.0000000001", "aws")).unwrap_err();
        assert_eq!(errors[0].column.as_deref(), Some("memory_gib"), "{errors:?}");
        for as_of in ["2026-02-29", "2026-+1-01", "2026-04-31", "1969-12-31"] {
            let csv = row("16", "aws").replace("2026-01-01", as_of);
            assert_eq!(parse(&csv).unwrap_err()[0].column.as_deref(), Some("as_of"), "{as_of}");
        }
        assert!(parse(&row("16", "aws").replace("2026-01-01", "2024-02-29")).is_ok());
        // Postgres cannot store NUL, so it is a located error rather than a failed import.
        for provider in ["a\u{0}ws", "\u{1e}aws"] {
            let errors = parse(&row("16", provider)).unwrap_err();
            assert_eq!(errors[0].column.as_deref(), Some("provider"), "{errors:?}");
            assert!(errors[0].reason.contains("control characters"), "{errors:?}");
        }
    }

    #[test]
    fn a_wrong_header_names_the_columns() {
        let errors = parse("provider,instance_type\naws,x\n").unwrap_err();
        assert_eq!(errors.len(), 1);
        assert!(errors[0].reason.starts_with("missing column(s): gpu_model"), "{errors:?}");
        assert_eq!(parse(&format!("{}\n", COLUMNS.join(","))).unwrap_err()[0].reason, "the catalog has no rows");
    }
}
