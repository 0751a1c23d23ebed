//! A report's 12-month forecast by team and by deployment, beside their monthly budgets, and
//! the month each first goes over (module `model::plan::forecast` for how a month is priced).
//! Exported long (a line per team or deployment and month) as CSV, XLSX and Parquet.

use std::collections::{BTreeMap, HashMap};

use model::money::{MicroUsd, cents, format_cents, to_usd};
use polars::prelude::*;
use serde::{Deserialize, Serialize};

use crate::reports::{Report, about_sheet, label, parquet_of};
use crate::store::BudgetRecord;

/// A team's or a deployment's spend month by month.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ForecastLine {
    /// `team` or `deployment`.
    pub scope: String,
    /// The team (empty: no team) or the deployment's name.
    pub name: String,
    /// A deployment's team (a team's own name for a team).
    pub team: String,
    /// One amount a month, micro-dollars.
    pub spend_micro_usd: Vec<MicroUsd>,
    pub budget_micro_usd: Option<MicroUsd>,
    /// The first month (1-based) over the budget.
    pub first_over: Option<u32>,
}

/// The forecast of a report: month labels (`YYYY-MM`) and a line per team, then per
/// deployment. Empty for a report stored before forecasts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Forecast {
    pub months: Vec<String>,
    pub lines: Vec<ForecastLine>,
}

/// The forecast of `report` against `budgets`.
pub fn forecast(report: &Report, budgets: &[BudgetRecord]) -> Forecast {
    let n = report.rows.iter().map(|r| r.forecast_micro_usd.len()).max().unwrap_or(0);
    if n == 0 || report.rows.iter().any(|r| r.forecast_micro_usd.len() != n) {
        return Forecast { months: vec![], lines: vec![] };
    }
    let start = model::calendar::Date::parse(&format!("{}-01", report.forecast_from)).ok();
    let months =
        (0..n as u32).map(|m| start.map(|d| d.month_after(m)).unwrap_or_else(|| format!("month {}", m + 1))).collect();
    let budgets: HashMap<(&str, &str), MicroUsd> =
        budgets.iter().map(|b| ((b.scope.as_str(), b.name.as_str()), b.monthly_micro_usd)).collect();
    let budget = |scope: &str, name: &str| budgets.get(&(scope, name)).copied();
    let mut teams: BTreeMap<&str, Vec<MicroUsd>> = BTreeMap::new();
    // By team and name: two teams' deployments of one name are two lines (a deployment's
    // budget, set by name, applies to each).
    let mut deployments: BTreeMap<(&str, &str), Vec<MicroUsd>> = BTreeMap::new();
    for r in &report.rows {
        // Each month's sum over the report is checked to fit when it is built.
        let team = teams.entry(r.team.as_str()).or_insert_with(|| vec![0; n]);
        let deployment = deployments.entry((r.team.as_str(), r.deployment.as_str())).or_insert_with(|| vec![0; n]);
        for (m, spend) in r.forecast_micro_usd.iter().enumerate() {
            team[m] += spend;
            deployment[m] += spend;
        }
    }
    let line = |scope: &str, name: &str, team: &str, spend: Vec<MicroUsd>| {
        let budget = budget(scope, name);
        ForecastLine {
            scope: scope.to_string(),
            name: name.to_string(),
            team: team.to_string(),
            first_over: budget.and_then(|b| model::plan::forecast::first_over(&spend, b)),
            spend_micro_usd: spend,
            budget_micro_usd: budget,
        }
    };
    let mut lines: Vec<ForecastLine> = teams.into_iter().map(|(team, spend)| line("team", team, team, spend)).collect();
    lines.extend(deployments.into_iter().map(|((team, name), spend)| line("deployment", name, team, spend)));
    Forecast { months, lines }
}

/// The forecast as a table, a row per line and month.
pub fn frame(report: &Report, f: &Forecast) -> PolarsResult<DataFrame> {
    let rows: Vec<(&ForecastLine, usize)> =
        f.lines.iter().flat_map(|l| (0..l.spend_micro_usd.len()).map(move |m| (l, m))).collect();
    let n = rows.len();
    let text =
        |g: &dyn Fn(&ForecastLine, usize) -> String| -> Vec<String> { rows.iter().map(|(l, m)| g(l, *m)).collect() };
    DataFrame::new(
        n,
        vec![
            Column::new("scope".into(), text(&|l, _| l.scope.clone())),
            Column::new("name".into(), text(&|l, _| l.name.clone())),
            Column::new("team".into(), text(&|l, _| l.team.clone())),
            Column::new("month".into(), text(&|_, m| f.months[m].clone())),
            Column::new(
                "spend_usd".into(),
                rows.iter().map(|(l, m)| to_usd(l.spend_micro_usd[*m])).collect::<Vec<f64>>(),
            ),
            Column::new(
                "budget_usd".into(),
                rows.iter().map(|(l, _)| l.budget_micro_usd.map(to_usd)).collect::<Vec<Option<f64>>>(),
            ),
            Column::new(
                "over_budget".into(),
                rows.iter()
                    .map(|(l, m)| l.budget_micro_usd.map(|b| l.spend_micro_usd[*m] > b))
                    .collect::<Vec<Option<bool>>>(),
            ),
            Column::new("price_catalog_version".into(), vec![report.catalog_version; n]),
            Column::new("report_id".into(), vec![report.id.clone(); n]),
            Column::new("generated_at".into(), vec![model::format::utc_iso(report.generated_at_ms); n]),
        ],
    )
}

/// CSV for finance: labels, money in cents with the exact micro-dollars beside the spend,
/// text neutralised against formulas. Team and deployment lines are both here: filter by
/// scope before summing.
pub fn to_csv(report: &Report, f: &Forecast) -> Result<Vec<u8>, String> {
    let text = |t: &str| crate::csv_cell::neutral(t).into_owned();
    let shown = |micros: MicroUsd| format_cents(cents(micros).saturating_mul(10_000));
    let mut out = csv::Writer::from_writer(Vec::new());
    // The table's columns, with the exact spend beside the spend in cents.
    let mut header: Vec<String> = frame(report, &Forecast { months: vec![], lines: vec![] })
        .map_err(|e| e.to_string())?
        .get_column_names()
        .iter()
        .map(|n| label(n))
        .collect();
    header.insert(5, label("spend_exact_micro_usd"));
    out.write_record(&header).map_err(|e| e.to_string())?;
    for l in &f.lines {
        for (m, spend) in l.spend_micro_usd.iter().enumerate() {
            out.write_record([
                l.scope.clone(),
                text(&l.name),
                text(&l.team),
                f.months[m].clone(),
                shown(*spend),
                spend.to_string(),
                l.budget_micro_usd.map(shown).unwrap_or_default(),
                l.budget_micro_usd.map(|b| if *spend > b { "yes" } else { "no" }.to_string()).unwrap_or_default(),
                report.catalog_version.to_string(),
                report.id.clone(),
                model::format::utc_iso(report.generated_at_ms),
            ])
            .map_err(|e| e.to_string())?;
        }
    }
    out.into_inner().map_err(|e| e.to_string())
}

/// Parquet, the table as it is.
pub fn to_parquet(report: &Report, f: &Forecast) -> Result<Vec<u8>, String> {
    frame(report, f).and_then(parquet_of).map_err(|e| e.to_string())
}

/// XLSX: a sheet with a line per team or deployment and a column per month (as finance reads
/// a forecast), the budget and the first month over, and an About sheet.
pub fn to_xlsx(report: &Report, f: &Forecast) -> Result<Vec<u8>, String> {
    use rust_xlsxwriter::{Format, Workbook};
    let fail = |e: rust_xlsxwriter::XlsxError| e.to_string();
    let mut book = Workbook::new();
    let money = Format::new().set_num_format("$#,##0.00");
    let bold = Format::new().set_bold();
    let over =
        Format::new().set_num_format("$#,##0.00").set_font_color(rust_xlsxwriter::Color::RGB(0xB0_00_20)).set_bold();
    let sheet = book.add_worksheet().set_name("Forecast").map_err(fail)?;
    let fixed = ["Scope", "Name", "Team", "Budget (USD)", "First month over"];
    for (c, name) in fixed.iter().chain(f.months.iter().map(String::as_str).collect::<Vec<_>>().iter()).enumerate() {
        sheet.write_string_with_format(0, c as u16, *name, &bold).map_err(fail)?;
    }
    for (i, l) in f.lines.iter().enumerate() {
        let row = i as u32 + 1;
        sheet.write_string(row, 0, &l.scope).map_err(fail)?;
        sheet.write_string(row, 1, &l.name).map_err(fail)?;
        sheet.write_string(row, 2, &l.team).map_err(fail)?;
        if let Some(b) = l.budget_micro_usd {
            sheet.write_number_with_format(row, 3, to_usd(b), &money).map_err(fail)?;
        }
        if let Some(m) = l.first_over {
            sheet.write_string(row, 4, &f.months[m as usize - 1]).map_err(fail)?;
        }
        for (m, spend) in l.spend_micro_usd.iter().enumerate() {
            let style = if l.budget_micro_usd.is_some_and(|b| *spend > b) { &over } else { &money };
            sheet.write_number_with_format(row, 5 + m as u16, to_usd(*spend), style).map_err(fail)?;
        }
    }
    sheet.set_freeze_panes(1, 2).map_err(fail)?;
    sheet.autofit();
    about_sheet(
        &mut book,
        report,
        &[
            ("Months", "the 12 calendar months after the report's period, each a billing month of 730 hours".into()),
            (
                "How",
                "volume grows by each deployment's growth a month; replicas follow the volume (the needed ones \
                 scaled with it plus today's idle ones, or today's replicas scaled with it); training as today"
                    .into(),
            ),
            ("Budgets", "as set when the file was downloaded; red: over budget".into()),
            ("Teams", "a team's line is the sum of its deployments' lines, idle replicas included".into()),
        ],
    )
    .map_err(fail)?;
    book.save_to_buffer().map_err(fail)
}

/// The forecast in `format` (`csv`, `xlsx`, `parquet`): bytes and MIME type.
pub fn export(report: &Report, f: &Forecast, format: &str) -> Option<Result<(Vec<u8>, &'static str), String>> {
    Some(match format {
        "csv" => to_csv(report, f).map(|b| (b, "text/csv; charset=utf-8")),
        "parquet" => to_parquet(report, f).map(|b| (b, "application/vnd.apache.parquet")),
        "xlsx" => to_xlsx(report, f).map(|b| (b, "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet")),
        _ => return None,
    })
}
