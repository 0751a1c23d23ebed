//! Chargeback: a report's cost by team (and cost centre), with the idle cost charged as the
//! report's policy says, exported as CSV, XLSX and Parquet like the report itself. Each team's
//! charge is its used serving cost, the idle cost the policy gives it, and its training; the
//! teams' charges add up to the report's total to the micro-dollar, whatever the policy.

use std::collections::BTreeMap;

use model::money::{MicroUsd, cents, format_cents, to_usd};
use polars::prelude::*;
use serde::{Deserialize, Serialize};

use crate::reports::{IdlePolicy, Report, about_sheet, label, parquet_of};
use model::plan::chargeback::share;

/// One team's (and cost centre's) share of a report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TeamRow {
    /// Empty for deployments charged to no team.
    pub team: String,
    pub cost_centre: Option<String>,
    pub deployments: u32,
    pub requests: u64,
    /// Serving cost of the replicas the volume needed (all of it where no need was given).
    pub used_serving_micro_usd: MicroUsd,
    /// The idle cost of the team's own deployments.
    pub idle_micro_usd: MicroUsd,
    /// The idle cost the policy charges the team.
    pub idle_charged_micro_usd: MicroUsd,
    pub training_micro_usd: MicroUsd,
    /// used serving + idle charged + training.
    pub chargeback_micro_usd: MicroUsd,
}

/// Each deployment's idle cost and idle charged, in cents as the files show them. The idle is
/// its own rounding; the charges are the idle cents of all deployments split again, largest
/// remainder first, in proportion to the exact charges, so that they add up to the idle shown
/// and every file's chargeback column adds up to its total column, cent for cent.
pub fn idle_cents(report: &Report) -> Vec<(i64, i64)> {
    let idle: Vec<i64> = report.rows.iter().map(|r| cents(r.idle_micro_usd)).collect();
    let charged = match report.idle_policy {
        IdlePolicy::Owner => idle.clone(),
        IdlePolicy::Proportional => {
            let exact: Vec<i64> = report.rows.iter().map(|r| r.idle_charged_micro_usd).collect();
            share(idle.iter().sum(), &exact).unwrap_or_else(|| vec![0; idle.len()])
        }
    };
    idle.into_iter().zip(charged).collect()
}

/// The report by team and cost centre, in order of team then cost centre.
pub fn teams(report: &Report) -> Vec<TeamRow> {
    let mut by: BTreeMap<(String, Option<String>), TeamRow> = BTreeMap::new();
    for r in &report.rows {
        let key = (r.team.clone(), r.cost_centre.clone());
        let t = by.entry(key).or_insert_with(|| TeamRow {
            team: r.team.clone(),
            cost_centre: r.cost_centre.clone(),
            deployments: 0,
            requests: 0,
            used_serving_micro_usd: 0,
            idle_micro_usd: 0,
            idle_charged_micro_usd: 0,
            training_micro_usd: 0,
            chargeback_micro_usd: 0,
        });
        // The report's totals are checked to fit, so no part of them overflows.
        t.deployments += 1;
        t.requests += r.requests;
        t.used_serving_micro_usd += r.serving_micro_usd - r.idle_micro_usd;
        t.idle_micro_usd += r.idle_micro_usd;
        t.idle_charged_micro_usd += r.idle_charged_micro_usd;
        t.training_micro_usd += r.training_micro_usd;
        t.chargeback_micro_usd += r.chargeback_micro_usd();
    }
    by.into_values().collect()
}

/// The chargeback table: one row per team, money in USD, with the policy and the report it
/// came from on every row.
pub fn frame(report: &Report) -> PolarsResult<DataFrame> {
    let rows = teams(report);
    let n = rows.len();
    let usd = |f: &dyn Fn(&TeamRow) -> MicroUsd| -> Vec<f64> { rows.iter().map(|r| to_usd(f(r))).collect() };
    let same = |name: &str, value: String| Column::new(name.into(), vec![value; n]);
    DataFrame::new(
        n,
        vec![
            Column::new("team".into(), rows.iter().map(|r| r.team.clone()).collect::<Vec<_>>()),
            Column::new("cost_centre".into(), rows.iter().map(|r| r.cost_centre.clone()).collect::<Vec<_>>()),
            Column::new("deployments".into(), rows.iter().map(|r| r.deployments).collect::<Vec<u32>>()),
            Column::new("requests".into(), rows.iter().map(|r| r.requests).collect::<Vec<u64>>()),
            Column::new("used_serving_usd".into(), usd(&|r| r.used_serving_micro_usd)),
            Column::new("idle_usd".into(), usd(&|r| r.idle_micro_usd)),
            Column::new("idle_charged_usd".into(), usd(&|r| r.idle_charged_micro_usd)),
            Column::new("training_usd".into(), usd(&|r| r.training_micro_usd)),
            Column::new("chargeback_usd".into(), usd(&|r| r.chargeback_micro_usd)),
            same("idle_policy", report.idle_policy.name().to_string()),
            same("period_from", report.from.clone()),
            same("period_to", report.to.clone()),
            Column::new("price_catalog_version".into(), vec![report.catalog_version; n]),
            same("report_id", report.id.clone()),
            same("generated_at", model::format::utc_iso(report.generated_at_ms)),
            same("generated_by", report.generated_by.clone()),
        ],
    )
}

/// Money columns of the CSV, in order: used serving, idle, idle charged, training, chargeback.
const MONEY: usize = 5;

/// The chargeback as CSV for finance: labels, money in cents (a team's chargeback is its used
/// serving plus idle charged plus training as shown), the exact micro-dollars beside it, text
/// neutralised against formulas, and a `TOTAL` line of the cents shown.
pub fn to_csv(report: &Report) -> PolarsResult<Vec<u8>> {
    let text = |t: &str| crate::csv_cell::neutral(t).into_owned();
    let fail = |e: csv::Error| PolarsError::ComputeError(e.to_string().into());
    let mut header: Vec<String> =
        frame(&Report { rows: vec![], ..report.clone() })?.get_column_names().iter().map(|n| label(n)).collect();
    header.insert(4 + MONEY, label("chargeback_exact_micro_usd"));
    let provenance = [
        report.idle_policy.name().to_string(),
        report.from.clone(),
        report.to.clone(),
        report.catalog_version.to_string(),
        report.id.clone(),
        model::format::utc_iso(report.generated_at_ms),
        text(&report.generated_by),
    ];
    let shown = |c: i64| format_cents(c.saturating_mul(10_000));
    let mut out = csv::Writer::from_writer(Vec::new());
    out.write_record(&header).map_err(fail)?;
    let (mut sums, mut deployments, mut requests) = ([0i64; MONEY], 0u32, 0u64);
    // Each team's cents are the sums of its deployments' cents as the report's file shows them,
    // so the two files agree line by line and in total.
    let mut team_cents: BTreeMap<(&str, Option<&str>), [i64; MONEY]> = BTreeMap::new();
    for (r, (idle, charged)) in report.rows.iter().zip(idle_cents(report)) {
        let (serving, training) = (cents(r.serving_micro_usd), cents(r.training_micro_usd));
        let c = team_cents.entry((r.team.as_str(), r.cost_centre.as_deref())).or_default();
        for (sum, v) in c.iter_mut().zip([serving - idle, idle, charged, training, serving - idle + charged + training])
        {
            *sum = sum.saturating_add(v);
        }
    }
    let rows = teams(report);
    for t in &rows {
        let money = team_cents.get(&(t.team.as_str(), t.cost_centre.as_deref())).copied().unwrap_or_default();
        for (sum, c) in sums.iter_mut().zip(&money) {
            *sum = sum.saturating_add(*c);
        }
        deployments += t.deployments;
        requests += t.requests;
        let mut record = vec![
            text(&t.team),
            text(t.cost_centre.as_deref().unwrap_or_default()),
            t.deployments.to_string(),
            t.requests.to_string(),
        ];
        record.extend(money.iter().map(|c| shown(*c)));
        record.push(t.chargeback_micro_usd.to_string());
        record.extend(provenance.iter().cloned());
        out.write_record(&record).map_err(fail)?;
    }
    let exact: MicroUsd = rows.iter().map(|t| t.chargeback_micro_usd).sum();
    let mut total = vec!["TOTAL".to_string(), String::new(), deployments.to_string(), requests.to_string()];
    total.extend(sums.iter().map(|c| shown(*c)));
    total.push(exact.to_string());
    total.extend(provenance.iter().cloned());
    out.write_record(&total).map_err(fail)?;
    out.into_inner().map_err(|e| PolarsError::ComputeError(e.to_string().into()))
}

/// The chargeback as Parquet (rows only).
pub fn to_parquet(report: &Report) -> PolarsResult<Vec<u8>> {
    parquet_of(frame(report)?)
}

/// The chargeback as an XLSX workbook: numbers as numbers, a `TOTAL` row of `=SUM` formulas
/// (cached with the exact sums), and an About sheet with the policy in words.
pub fn to_xlsx(report: &Report) -> Result<Vec<u8>, rust_xlsxwriter::XlsxError> {
    use rust_xlsxwriter::utility::column_number_to_name;
    use rust_xlsxwriter::{Format, Formula, Workbook};
    let df = frame(report).map_err(|e| rust_xlsxwriter::XlsxError::ParameterError(e.to_string()))?;
    let rows = teams(report);
    let mut book = Workbook::new();
    let money = Format::new().set_num_format("$#,##0.00");
    let bold = Format::new().set_bold();
    let money_bold = Format::new().set_num_format("$#,##0.00").set_bold();
    let sheet = book.add_worksheet().set_name("Chargeback")?;
    for (c, name) in df.get_column_names().iter().enumerate() {
        sheet.write_string_with_format(0, c as u16, label(name), &bold)?;
    }
    let amounts = |t: &TeamRow| {
        [
            t.used_serving_micro_usd,
            t.idle_micro_usd,
            t.idle_charged_micro_usd,
            t.training_micro_usd,
            t.chargeback_micro_usd,
        ]
    };
    for (i, t) in rows.iter().enumerate() {
        let row = i as u32 + 1;
        sheet.write_string(row, 0, &t.team)?;
        sheet.write_string(row, 1, t.cost_centre.as_deref().unwrap_or_default())?;
        sheet.write_number(row, 2, f64::from(t.deployments))?;
        sheet.write_number(row, 3, t.requests as f64)?;
        for (k, v) in amounts(t).iter().enumerate() {
            sheet.write_number_with_format(row, 4 + k as u16, to_usd(*v), &money)?;
        }
        sheet.write_string(row, 9, report.idle_policy.name())?;
        sheet.write_string(row, 10, &report.from)?;
        sheet.write_string(row, 11, &report.to)?;
        sheet.write_number(row, 12, report.catalog_version as f64)?;
        sheet.write_string(row, 13, &report.id)?;
        sheet.write_string(row, 14, model::format::utc_iso(report.generated_at_ms))?;
        sheet.write_string(row, 15, &report.generated_by)?;
    }
    let total = rows.len() as u32 + 1;
    sheet.write_string_with_format(total, 0, "TOTAL", &bold)?;
    let sum_of = |column: u16, value: f64| {
        let letter = column_number_to_name(column);
        Formula::new(format!("=SUM({letter}2:{letter}{total})")).set_result(value.to_string())
    };
    sheet.write_formula(total, 2, sum_of(2, rows.iter().map(|t| f64::from(t.deployments)).sum()))?;
    sheet.write_formula(total, 3, sum_of(3, rows.iter().map(|t| t.requests as f64).sum()))?;
    for k in 0..MONEY {
        let exact: MicroUsd = rows.iter().map(|t| amounts(t)[k]).sum();
        let column = 4 + k as u16;
        sheet.write_formula_with_format(total, column, sum_of(column, to_usd(exact)), &money_bold)?;
    }
    sheet.set_freeze_panes(1, 1)?;
    sheet.autofit();
    about_sheet(
        &mut book,
        report,
        &[
            ("Idle cost policy", format!("{}: {}", report.idle_policy.name(), report.idle_policy.describe())),
            ("Idle cost", "replicas provisioned beyond those the volume needs at its SLO, by the replica-hour".into()),
            (
                "Chargeback",
                "used serving + idle charged + training; the teams' chargebacks add up to the report's total".into(),
            ),
        ],
    )?;
    book.save_to_buffer()
}

/// The chargeback of `report` in `format` (`csv`, `xlsx`, `parquet`): bytes, MIME type.
pub fn export(report: &Report, format: &str) -> Option<Result<(Vec<u8>, &'static str), String>> {
    Some(match format {
        "csv" => to_csv(report).map(|b| (b, "text/csv; charset=utf-8")).map_err(|e| e.to_string()),
        "parquet" => to_parquet(report).map(|b| (b, "application/vnd.apache.parquet")).map_err(|e| e.to_string()),
        "xlsx" => to_xlsx(report)
            .map(|b| (b, "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"))
            .map_err(|e| e.to_string()),
        _ => return None,
    })
}
