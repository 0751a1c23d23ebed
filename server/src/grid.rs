//! The grid-intensity table as CSV: each cloud region's grid emissions (g CO2e per kWh) and its
//! provider's PUE, dated and sourced, read with every problem located like the price catalog.

use std::collections::BTreeSet;

use model::plan::carbon::MAX_GRID_G_PER_KWH;
use model::plan::owned::PUE_RANGE;
use serde::Serialize;

use crate::csv_cell;
use crate::prices::{CellError, control_character, read_csv};

/// The table shipped with the server, loaded into an empty database (see `data/README.md`).
pub const DEFAULT_TABLE: &str = include_str!("../data/grid-intensity.csv");

/// The header every grid-intensity CSV has, in this order.
pub const COLUMNS: [&str; 7] = ["provider", "region", "location", "g_co2e_per_kwh", "pue", "source", "as_of"];

/// Largest table accepted in one import.
pub const MAX_ROWS: usize = 5_000;

/// One region's grid.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct GridRow {
    pub provider: String,
    pub region: String,
    pub location: String,
    /// Grams of CO2e a kWh drawn from this grid emits (location-based, yearly average).
    pub g_co2e_per_kwh: f64,
    /// The provider's facility PUE used with it.
    pub pue: f64,
    pub source: String,
    /// `YYYY-MM-DD`: when the figure was read.
    pub as_of: String,
}

/// Every row, or every problem found (up to 100 of them).
pub fn parse(text: &str) -> Result<Vec<GridRow>, Vec<CellError>> {
    let mut seen = BTreeSet::new();
    read_csv(text, &COLUMNS, MAX_ROWS, "the table", |line, record, errors| {
        let before = errors.len();
        let mut bad = |c: usize, reason: String| {
            errors.push(CellError { line, column: Some(COLUMNS[c].to_string()), reason });
        };
        let cell = |c: usize| csv_cell::restore(record.get(c).unwrap_or("").trim()).to_string();
        for (c, most) in [(0, 64), (1, 64), (2, 128), (5, 300)] {
            let text = cell(c);
            if text.is_empty() {
                bad(c, "must not be empty".into());
            } else if text.chars().count() > most {
                bad(c, format!("must be at most {most} characters"));
            } else if let Some(reason) = control_character(&text) {
                bad(c, reason);
            } else if c < 2 && text.contains(char::is_whitespace) {
                // "provider region" names a row in the pickers: neither may hold a space.
                bad(c, "must not contain spaces".into());
            }
        }
        let mut number = |c: usize, low: f64, high: f64, unit: &str| {
            let text = cell(c);
            match text.parse::<f64>() {
                Ok(v) if (low..=high).contains(&v) => v,
                _ => {
                    bad(c, format!("“{text}” is not a number from {low} to {high}{unit}"));
                    0.0
                }
            }
        };
        let g_co2e_per_kwh = number(3, 0.0, MAX_GRID_G_PER_KWH, " g CO2e per kWh");
        let pue = number(4, PUE_RANGE.0, PUE_RANGE.1, "");
        let as_of = cell(6);
        if let Err(reason) = model::calendar::Date::parse(&as_of) {
            bad(6, reason);
        }
        let (provider, region) = (cell(0), cell(1));
        if errors.len() == before && !seen.insert((provider.clone(), region.clone())) {
            let reason = format!("{provider} {region} is listed twice");
            errors.push(CellError { line, column: None, reason });
        }
        (errors.len() == before).then(|| GridRow {
            provider,
            region,
            location: cell(2),
            g_co2e_per_kwh,
            pue,
            source: cell(5),
            as_of,
        })
    })
}

/// The table as CSV, the same shape [`parse`] reads; numbers in the shortest form that reads
/// back the same.
pub fn to_csv(rows: &[GridRow]) -> String {
    let mut writer = csv::Writer::from_writer(Vec::new());
    let _ = writer.write_record(COLUMNS);
    for r in rows {
        let text = |t: &str| csv_cell::neutral(t).into_owned();
        let _ = writer.write_record([
            text(&r.provider),
            text(&r.region),
            text(&r.location),
            r.g_co2e_per_kwh.to_string(),
            r.pue.to_string(),
            text(&r.source),
            text(&r.as_of),
        ]);
    }
    String::from_utf8(writer.into_inner().unwrap_or_default()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find<'a>(rows: &'a [GridRow], provider: &str, region: &str) -> Option<&'a GridRow> {
        rows.iter().find(|r| r.provider == provider && r.region == region)
    }

    #[test]
    fn the_shipped_table_reads_and_writes_back_unchanged() {
        let rows = parse(DEFAULT_TABLE).expect("the shipped table is valid");
        let virginia = find(&rows, "aws", "us-east-1").unwrap();
        assert_eq!((virginia.g_co2e_per_kwh, virginia.pue), (379.069, 1.135));
        assert!(virginia.source.contains("eGRID2020"), "{}", virginia.source);
        // Every region the shipped price catalog prices in has a grid figure.
        for price in crate::prices::parse(crate::prices::DEFAULT_CATALOG).unwrap() {
            let region = price.region.as_deref().unwrap();
            assert!(find(&rows, &price.provider, region).is_some(), "{} {region}", price.provider);
        }
        assert_eq!(to_csv(&rows), DEFAULT_TABLE);
    }

    #[test]
    fn every_problem_is_located() {
        let csv = format!(
            "{}\naws,r1,X,100,1.2,s,2026-01-01\naws,r2,,-1,0.5,,2026-13-01\naws,r1,X,100,1.2,s,2026-01-01\naws,r3,X,NaN,1.2,s,2026-01-01\naws,r4,X\n=cmd,r5,\"a\u{0}b\",2500,1.2,s,2026-01-01\n",
            COLUMNS.join(",")
        );
        let errors = parse(&csv).unwrap_err();
        let at = |line: u64, column: &str| errors.iter().any(|e| e.line == line && e.column.as_deref() == Some(column));
        assert!(at(3, "location") && at(3, "g_co2e_per_kwh") && at(3, "pue") && at(3, "source") && at(3, "as_of"));
        assert!(errors.iter().any(|e| e.line == 4 && e.reason.contains("twice")), "{errors:?}");
        assert!(at(5, "g_co2e_per_kwh"), "NaN is refused: {errors:?}");
        assert!(errors.iter().any(|e| e.line == 6 && e.reason.contains("has 3 fields")), "{errors:?}");
        assert!(at(7, "location") && at(7, "g_co2e_per_kwh"), "{errors:?}");
        assert!(!errors.iter().any(|e| e.line == 2), "line 2 is fine: {errors:?}");
        let long = format!("{}\naws,us east,X,1,1,{},2026-01-01\n", COLUMNS.join(","), "s".repeat(301));
        let errors = parse(&long).unwrap_err();
        assert_eq!(errors.iter().filter_map(|e| e.column.as_deref()).collect::<Vec<_>>(), ["region", "source"]);
        let header = parse("provider,region\n").unwrap_err();
        assert!(header[0].reason.contains("missing column(s): location"), "{header:?}");
    }

    #[test]
    fn a_formula_in_a_cell_is_written_as_text_and_read_back() {
        let row = GridRow {
            provider: "=HYPERLINK(\"http://x\")".into(),
            region: "r".into(),
            location: "+1".into(),
            g_co2e_per_kwh: 0.1 + 0.2,
            pue: 1.0,
            source: "s".into(),
            as_of: "2026-01-01".into(),
        };
        let csv = to_csv(std::slice::from_ref(&row));
        assert!(csv.lines().nth(1).unwrap().starts_with("\"'=HYPERLINK"), "{csv}");
        assert_eq!(parse(&csv).unwrap(), vec![row]);
    }
}
