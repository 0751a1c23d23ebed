//! Charts as SVG text, drawn with plotters the same way on the server and in the browser.
//!
//! Every series has its own colour (Okabe–Ito, safe for colour-blind readers), its own marker
//! shape and its own dash pattern, and the legend shows all three, so no chart is read by
//! colour alone. Log axes are drawn by plotting log10 of the values and labelling the ticks
//! with the values themselves.

use plotters::coord::Shift;
use plotters::coord::ranged1d::SegmentedCoord;
use plotters::coord::types::{RangedCoordf64, RangedCoordu32};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Okabe–Ito colours, then black.
const PALETTE: [RGBColor; 7] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(0, 0, 0),
];
const GREY: RGBColor = RGBColor(110, 110, 110);
const FONT: &str = "sans-serif";

/// One line of a chart.
#[derive(Clone, Debug, Default)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

impl Series {
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series { name: name.into(), points }
    }
}

/// A shaded band between a low and a high line (a P10–P90 range).
#[derive(Clone, Debug)]
pub struct Band {
    pub name: String,
    /// (x, low, high)
    pub points: Vec<(f64, f64, f64)>,
}

/// A vertical or horizontal reference line with its label.
#[derive(Clone, Debug)]
pub struct Rule {
    pub at: f64,
    pub label: String,
}

/// A chart of lines over x.
#[derive(Clone, Debug)]
pub struct LineChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub x_log: bool,
    pub y_log: bool,
    pub x_format: fn(f64) -> String,
    pub y_format: fn(f64) -> String,
    pub series: Vec<Series>,
    pub bands: Vec<Band>,
    /// Vertical lines (a break-even point).
    pub x_rules: Vec<Rule>,
    /// Horizontal lines (a floor, an SLO).
    pub y_rules: Vec<Rule>,
    /// Draw markers only, no lines (a scatter).
    pub points_only: bool,
    /// Start the y axis at zero (off for figures that live far from it, like accuracy).
    pub y_from_zero: bool,
}

impl LineChart {
    pub fn new(title: impl Into<String>, x_label: impl Into<String>, y_label: impl Into<String>) -> Self {
        LineChart {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            x_log: false,
            y_log: false,
            x_format: |v| format!("{v}"),
            y_format: |v| format!("{v}"),
            series: vec![],
            bands: vec![],
            x_rules: vec![],
            y_rules: vec![],
            points_only: false,
            y_from_zero: true,
        }
    }
}

const WIDTH: u32 = 720;
const HEIGHT: u32 = 380;

const LEGEND_ROW: u32 = 20;

/// Room under the x axis for a legend of `entries` in two columns.
fn legend_height(entries: usize) -> u32 {
    if entries == 0 { 0 } else { 12 + LEGEND_ROW * entries.div_ceil(2) as u32 }
}

/// The legend under the chart: each entry's colour, dash pattern and marker, and its name.
fn draw_legend(root: &DrawingArea<SVGBackend<'_>, Shift>, chart: &LineChart) -> DrawResult {
    let top = HEIGHT as i32 + 4;
    let at = |k: usize| (24 + (k % 2) as i32 * (WIDTH as i32 / 2), top + (k / 2) as i32 * LEGEND_ROW as i32);
    let text = |name: &str, (x, y): (i32, i32)| {
        Text::new(
            name.to_string(),
            (x + 34, y),
            (FONT, 13).into_font().color(&BLACK).pos(Pos::new(HPos::Left, VPos::Center)),
        )
    };
    let mut k = 0;
    for (i, band) in chart.bands.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let (x, y) = at(k);
        root.draw(&Rectangle::new([(x, y - 6), (x + 26, y + 6)], colour.mix(0.3).filled()))?;
        root.draw(&text(&band.name, (x, y)))?;
        k += 1;
    }
    for (i, series) in chart.series.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let (x, y) = at(k);
        if !chart.points_only {
            let style = colour.stroke_width(2);
            // The same dash pattern as the series: solid, long dashes, dots.
            let (dash, gap) = [(26, 0), (7, 3), (2, 3)][i % 3];
            let mut from = x;
            while from < x + 26 {
                root.draw(&PathElement::new([(from, y), ((from + dash).min(x + 26), y)], style))?;
                from += dash + gap;
            }
        }
        root.draw(&(EmptyElement::at((x + 13, y)) + marker_shape(i % 4, 4, colour, (0, 0))))?;
        root.draw(&text(&series.name, (x, y)))?;
        k += 1;
    }
    Ok(())
}

fn axis(log: bool) -> impl Fn(f64) -> Option<f64> {
    move |v: f64| {
        if !v.is_finite() || (log && v <= 0.0) {
            None
        } else if log {
            Some(v.log10())
        } else {
            Some(v)
        }
    }
}

/// The narrowest span of a log axis, in decades (a factor of two).
const MIN_LOG_SPAN: f64 = std::f64::consts::LOG10_2;

/// The range of the values, padded, never empty.
fn span(values: impl Iterator<Item = f64>, log: bool, from_zero: bool) -> Option<(f64, f64)> {
    let (mut lo, mut hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if !lo.is_finite() || !hi.is_finite() {
        return None;
    }
    if from_zero && !log {
        lo = lo.min(0.0);
    }
    if hi - lo < 1e-12 * hi.abs().max(1.0) {
        let pad = if log { 0.5 } else { hi.abs().max(1.0) * 0.5 };
        return Some((lo - pad, hi + pad));
    }
    // A log axis spanning a few per cent (TTFTs of 104–105 ms) would put its ticks so close that
    // labels of three significant figures repeat ("104 ms" five times): at least a factor of two.
    if log && hi - lo < MIN_LOG_SPAN {
        let mid = 0.5 * (lo + hi);
        return Some((mid - 0.5 * MIN_LOG_SPAN, mid + 0.5 * MIN_LOG_SPAN));
    }
    let pad = (hi - lo) * 0.05;
    if !(from_zero && !log && lo == 0.0) {
        lo -= pad;
    }
    hi += pad;
    Some((lo, hi))
}

/// The SVG text of a line chart; a short note instead when nothing can be drawn.
pub fn line_chart(chart: &LineChart) -> String {
    let (fx, fy) = (axis(chart.x_log), axis(chart.y_log));
    let xs = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .chain(chart.bands.iter().flat_map(|b| b.points.iter().map(|p| p.0)))
        .chain(chart.x_rules.iter().map(|r| r.at))
        .filter_map(&fx);
    let ys = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .chain(chart.bands.iter().flat_map(|b| b.points.iter().flat_map(|p| [p.1, p.2])))
        .chain(chart.y_rules.iter().map(|r| r.at))
        .filter_map(&fy);
    let (Some(xr), Some(yr)) = (span(xs, chart.x_log, false), span(ys, chart.y_log, chart.y_from_zero)) else {
        return empty(&chart.title);
    };
    let entries = chart.series.len() + chart.bands.len();
    let svg = render(&chart.title, HEIGHT + legend_height(entries), |root| draw_lines(root, chart, xr, yr));
    // The figures themselves, for screen readers and for anyone who would rather read them.
    let mut rows = Vec::new();
    for s in &chart.series {
        for &(x, y) in s.points.iter().filter(|p| p.0.is_finite() && p.1.is_finite()) {
            rows.push(vec![s.name.clone(), (chart.x_format)(x), (chart.y_format)(y)]);
        }
    }
    for b in &chart.bands {
        for &(x, lo, hi) in b.points.iter().filter(|p| p.0.is_finite() && p.1.is_finite() && p.2.is_finite()) {
            rows.push(vec![
                b.name.clone(),
                (chart.x_format)(x),
                format!("{} – {}", (chart.y_format)(lo), (chart.y_format)(hi)),
            ]);
        }
    }
    with_table(svg, &chart.title, &["series", &chart.x_label, &chart.y_label], &rows)
}

type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// An SVG of `height` drawn by `draw` on white; a short note instead if drawing fails.
fn render(title: &str, height: u32, draw: impl FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> DrawResult) -> String {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        let drawn: DrawResult = (|| {
            root.fill(&WHITE)?;
            draw(&root)?;
            root.present()?;
            Ok(())
        })();
        if drawn.is_err() {
            drop(root);
            return empty(title);
        }
    }
    responsive(svg, title)
}

fn draw_lines(
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    chart: &LineChart,
    xr: (f64, f64),
    yr: (f64, f64),
) -> DrawResult {
    let (fx, fy) = (axis(chart.x_log), axis(chart.y_log));
    let (x_log, y_log, x_format, y_format) = (chart.x_log, chart.y_log, chart.x_format, chart.y_format);
    let mut c = ChartBuilder::on(root)
        .caption(&chart.title, (FONT, 18))
        .margin(12)
        .margin_bottom(12 + legend_height(chart.series.len() + chart.bands.len()))
        .x_label_area_size(44)
        .y_label_area_size(84)
        .build_cartesian_2d(xr.0..xr.1, yr.0..yr.1)?;
    c.configure_mesh()
        .x_desc(&chart.x_label)
        .y_desc(&chart.y_label)
        .x_labels(6)
        .y_labels(6)
        .x_label_formatter(&|v| x_format(if x_log { 10f64.powf(*v) } else { *v }))
        .y_label_formatter(&|v| y_format(if y_log { 10f64.powf(*v) } else { *v }))
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 14))
        .light_line_style(RGBColor(235, 235, 235))
        .bold_line_style(RGBColor(215, 215, 215))
        .draw()?;
    for (i, band) in chart.bands.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let upper = band.points.iter().filter_map(|p| Some((fx(p.0)?, fy(p.2)?)));
        let lower: Vec<_> = band.points.iter().filter_map(|p| Some((fx(p.0)?, fy(p.1)?))).collect();
        let outline: Vec<(f64, f64)> = upper.chain(lower.into_iter().rev()).collect();
        c.draw_series(std::iter::once(Polygon::new(outline, colour.mix(0.18).filled())))?;
    }
    for (i, series) in chart.series.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let style = colour.stroke_width(2);
        let points: Vec<(f64, f64)> = series.points.iter().filter_map(|p| Some((fx(p.0)?, fy(p.1)?))).collect();
        if !chart.points_only {
            match i % 3 {
                0 => c.draw_series(LineSeries::new(points.clone(), style))?,
                1 => c.draw_series(DashedLineSeries::new(points.clone(), 10, 5, style))?,
                _ => c.draw_series(DashedLineSeries::new(points.clone(), 3, 4, style))?,
            };
        }
        let marker = i % 4;
        let size = if chart.points_only { 5 } else { 4 };
        c.draw_series(points.iter().map(|&p| EmptyElement::at(p) + marker_shape(marker, size, colour, (0, 0))))?;
    }
    for rule in &chart.x_rules {
        if let Some(x) = fx(rule.at) {
            c.draw_series(DashedLineSeries::new([(x, yr.0), (x, yr.1)], 6, 4, GREY.stroke_width(2)))?;
            // A rule in the right half is labelled to its left, so the label stays in the plot.
            let side = if x > xr.0 + (xr.1 - xr.0) * 0.5 { HPos::Right } else { HPos::Left };
            c.draw_series(std::iter::once(Text::new(
                rule.label.clone(),
                (x, yr.1 - (yr.1 - yr.0) * 0.04),
                (FONT, 13).into_font().color(&BLACK).pos(Pos::new(side, VPos::Top)),
            )))?;
        }
    }
    for rule in &chart.y_rules {
        if let Some(y) = fy(rule.at) {
            c.draw_series(DashedLineSeries::new([(xr.0, y), (xr.1, y)], 6, 4, GREY.stroke_width(2)))?;
            c.draw_series(std::iter::once(Text::new(
                rule.label.clone(),
                (xr.0 + (xr.1 - xr.0) * 0.01, y + (yr.1 - yr.0) * 0.04),
                (FONT, 13).into_font().color(&BLACK),
            )))?;
        }
    }
    draw_legend(root, chart)?;
    Ok(())
}

fn marker_shape<DB: DrawingBackend>(
    kind: usize,
    size: i32,
    colour: RGBColor,
    at: (i32, i32),
) -> DynElement<'static, DB, (i32, i32)> {
    let filled = colour.filled();
    match kind {
        0 => Circle::new(at, size, filled).into_dyn(),
        1 => TriangleMarker::new(at, size + 1, filled).into_dyn(),
        2 => Rectangle::new([(at.0 - size, at.1 - size), (at.0 + size, at.1 + size)], filled).into_dyn(),
        _ => Cross::new(at, size + 1, colour.stroke_width(2)).into_dyn(),
    }
}

type RowChart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, SegmentedCoord<RangedCoordu32>>>;

/// A chart with one horizontal slot per named row (the first at the top) over an x range.
#[allow(clippy::too_many_arguments)]
fn row_chart<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, Shift>,
    title: &str,
    unit_label: &str,
    (lo, hi): (f64, f64),
    names: &[&str],
    label_width: u32,
    legend: u32,
    format: fn(f64) -> String,
) -> Result<RowChart<'a, 'b>, Box<dyn std::error::Error>> {
    let n = names.len() as u32;
    let mut c = ChartBuilder::on(root)
        .caption(title, (FONT, 18))
        .margin(12)
        .margin_bottom(12 + legend)
        .x_label_area_size(44)
        .y_label_area_size(label_width)
        .build_cartesian_2d(lo..hi, (0u32..n).into_segmented())?;
    c.configure_mesh()
        .disable_y_mesh()
        .x_desc(unit_label)
        .x_labels(5)
        .x_label_formatter(&|v| format(*v))
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) if *i < n => names[(n - 1 - i) as usize].to_string(),
            _ => String::new(),
        })
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 14))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;
    Ok(c)
}

/// Horizontal bars around a base value: how far each input moves the answer when it alone
/// goes to its P10 (light bar, labelled) and its P90 (dark bar, labelled).
pub fn tornado(
    title: &str,
    unit_label: &str,
    base: f64,
    rows: &[(String, f64, f64)],
    format: fn(f64) -> String,
) -> String {
    let table: Vec<Vec<String>> =
        rows.iter().map(|(name, lo, hi)| vec![name.clone(), format(*lo), format(*hi)]).collect();
    let header = [
        format!("input (base {})", format(base)),
        format!("{unit_label} at its P10"),
        format!("{unit_label} at its P90"),
    ];
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    with_table(tornado_svg(title, unit_label, base, rows, format), title, &header, &table)
}

fn tornado_svg(
    title: &str,
    unit_label: &str,
    base: f64,
    rows: &[(String, f64, f64)],
    format: fn(f64) -> String,
) -> String {
    if rows.is_empty() || !base.is_finite() || rows.iter().any(|r| !r.1.is_finite() || !r.2.is_finite()) {
        return empty(title);
    }
    let lo = rows.iter().map(|r| r.1.min(r.2)).fold(base, f64::min);
    let hi = rows.iter().map(|r| r.1.max(r.2)).fold(base, f64::max);
    let pad = ((hi - lo) * 0.12).max(base.abs() * 0.01).max(1e-12);
    let n = rows.len() as u32;
    render(title, 110 + 46 * (n + 1), |root| {
        let names: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
        let mut c = row_chart(root, title, unit_label, ((lo - pad), (hi + pad)), &names, 130, 0, format)?;
        for (i, (_, at_p10, at_p90)) in rows.iter().enumerate() {
            let slot = n - 1 - i as u32;
            for (end, colour, label) in [(*at_p10, PALETTE[5], "P10"), (*at_p90, PALETTE[0], "P90")] {
                if (end - base).abs() <= (hi - lo) * 1e-3 {
                    continue;
                }
                let mut bar = Rectangle::new(
                    [(base, SegmentValue::Exact(slot)), (end, SegmentValue::Exact(slot + 1))],
                    colour.filled(),
                );
                bar.set_margin(9, 9, 0, 0);
                c.draw_series(std::iter::once(bar))?;
                let anchor =
                    if end >= base { Pos::new(HPos::Left, VPos::Center) } else { Pos::new(HPos::Right, VPos::Center) };
                let nudge = (hi - lo).max(1e-12) * if end >= base { 0.01 } else { -0.01 };
                c.draw_series(std::iter::once(Text::new(
                    label,
                    (end + nudge, SegmentValue::CenterOf(slot)),
                    (FONT, 12).into_font().color(&BLACK).pos(anchor),
                )))?;
            }
        }
        c.draw_series(DashedLineSeries::new(
            [(base, SegmentValue::Exact(0)), (base, SegmentValue::Exact(n))],
            6,
            4,
            BLACK.stroke_width(1),
        ))?;
        Ok(())
    })
}

/// Horizontal stacked bars, one per row, each segment with its own colour and a legend below.
pub fn stacked_bars(
    title: &str,
    unit_label: &str,
    rows: &[(String, Vec<f64>)],
    segments: &[&str],
    format: fn(f64) -> String,
) -> String {
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|(name, values)| std::iter::once(name.clone()).chain(values.iter().map(|v| format(*v))).collect())
        .collect();
    let header: Vec<&str> = std::iter::once("name").chain(segments.iter().copied()).collect();
    with_table(stacked_bars_svg(title, unit_label, rows, segments, format), title, &header, &table)
}

fn stacked_bars_svg(
    title: &str,
    unit_label: &str,
    rows: &[(String, Vec<f64>)],
    segments: &[&str],
    format: fn(f64) -> String,
) -> String {
    if rows.is_empty() || rows.iter().any(|r| r.1.iter().any(|v| !v.is_finite() || *v < 0.0)) {
        return empty(title);
    }
    let hi = rows.iter().map(|r| r.1.iter().sum::<f64>()).fold(0.0, f64::max).max(1e-9) * 1.05;
    let n = rows.len() as u32;
    let legend = 12 + LEGEND_ROW * segments.len().div_ceil(2) as u32;
    // One slot per row and an empty one on top (how plotters segments 0..n).
    let height = 110 + 40 * (n + 1);
    render(title, height + legend, |root| {
        let names: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
        let mut c = row_chart(root, title, unit_label, (0.0, hi), &names, 170, legend, format)?;
        for (i, (_, values)) in rows.iter().enumerate() {
            let slot = n - 1 - i as u32;
            let mut start = 0.0;
            for (k, v) in values.iter().enumerate() {
                let colour = PALETTE[k % PALETTE.len()];
                let mut bar = Rectangle::new(
                    [(start, SegmentValue::Exact(slot)), (start + v, SegmentValue::Exact(slot + 1))],
                    colour.filled(),
                );
                bar.set_margin(6, 6, 0, 0);
                c.draw_series(std::iter::once(bar))?;
                start += v;
            }
        }
        for (k, name) in segments.iter().enumerate() {
            let colour = PALETTE[k % PALETTE.len()];
            let (x, y) =
                (24 + (k % 2) as i32 * (WIDTH as i32 / 2), height as i32 + 4 + (k / 2) as i32 * LEGEND_ROW as i32);
            root.draw(&Rectangle::new([(x, y - 6), (x + 26, y + 6)], colour.filled()))?;
            root.draw(&Text::new(
                name.to_string(),
                (x + 34, y),
                (FONT, 13).into_font().color(&BLACK).pos(Pos::new(HPos::Left, VPos::Center)),
            ))?;
        }
        Ok(())
    })
}

/// Makes the SVG scale to its container and gives it an accessible name.
fn responsive(svg: String, title: &str) -> String {
    let head_end = svg.find('>').unwrap_or(0);
    let (head, rest) = svg.split_at(head_end);
    let head =
        head.replacen(&format!("width=\"{WIDTH}\""), "width=\"100%\"", 1).replacen(" height=\"", " data-height=\"", 1);
    format!("{head} role=\"img\" aria-label=\"{}\"{rest}", escape(title))
}

/// A drawn chart followed by its figures; a "nothing to draw" note alone. The chart is never
/// drawn narrower than [`MIN_SHOWN_WIDTH`] (its smallest text stays at 11 px or more): on a
/// narrower screen it scrolls sideways in its own focusable box, the table beneath it at hand.
fn with_table(svg: String, title: &str, header: &[&str], rows: &[Vec<String>]) -> String {
    if svg.starts_with("<svg") {
        format!(
            "<div class=\"chart-scroll\" tabindex=\"0\" style=\"--min-chart-width: {MIN_SHOWN_WIDTH}px\">{svg}</div>{}",
            data_table(title, header, rows)
        )
    } else {
        svg
    }
}

/// The smallest text in a chart (tick labels, 12 px at the drawn width of [`WIDTH`]) shown at no
/// less than 11 px.
const MIN_SHOWN_WIDTH: u32 = (WIDTH * 11).div_ceil(SMALLEST_FONT);
const SMALLEST_FONT: u32 = 12;

/// A chart's figures as a table folded under the chart: screen readers reach it, and a person
/// can open it to read exact values where the chart's text would be too small.
fn data_table(title: &str, header: &[&str], rows: &[Vec<String>]) -> String {
    let cells = |tag: &str, row: &mut dyn Iterator<Item = &str>| -> String {
        row.map(|c| format!("<{tag}>{}</{tag}>", escape(c))).collect()
    };
    let body: String =
        rows.iter().map(|r| format!("<tr>{}</tr>", cells("td", &mut r.iter().map(String::as_str)))).collect();
    format!(
        "<details class=\"chart-data\"><summary>The figures of “{}”</summary><div class=\"table-wrap\" tabindex=\"0\"><table><thead><tr>{}</tr></thead><tbody>{body}</tbody></table></div></details>",
        escape(title),
        cells("th", &mut header.iter().copied())
    )
}

fn empty(title: &str) -> String {
    format!("<p class=\"chart-empty\">{}: nothing to draw for these inputs.</p>", escape(title))
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_chart_names_every_series_and_its_rules() {
        let mut chart = LineChart::new("Cost", "requests", "USD");
        chart.x_log = true;
        chart.series.push(Series::new("baseline", vec![(1e6, 2.0), (1e7, 1.0)]));
        chart.series.push(Series::new("distilled", vec![(1e6, 2.5), (1e7, 0.5), (f64::NAN, 1.0)]));
        chart.x_rules.push(Rule { at: 3e6, label: "break-even 3M".into() });
        let svg = line_chart(&chart);
        assert!(svg.contains("<svg") && svg.contains("role=\"img\" aria-label=\"Cost\""), "{}", &svg[..200]);
        // Never shown so narrow that its 12 px tick labels fall below 11 px.
        assert!(svg.starts_with("<div class=\"chart-scroll\" tabindex=\"0\" style=\"--min-chart-width: 660px\"><svg"));
        for text in ["baseline", "distilled", "break-even 3M"] {
            assert!(svg.contains(text), "{text} missing");
        }
        assert!(!svg.contains("NaN"));
        // The figures follow as a table: one row per drawn point, the NaN one left out.
        let table = &svg[svg.find("<details class=\"chart-data\">").expect("a data table")..];
        assert_eq!(table.matches("<tr>").count(), 1 + 4, "{table}");
        assert!(table.contains("<th>requests</th>") && table.contains("<td>distilled</td>"));
    }

    #[test]
    fn a_narrow_log_axis_labels_each_tick_differently() {
        // Time to first token of a server that answers in 104-105 ms whatever the load.
        let mut chart = LineChart::new("TTFT", "seconds (log)", "fraction");
        chart.x_log = true;
        chart.x_format = model::format::seconds;
        chart.series.push(Series::new("1/s", vec![(0.1036, 0.5), (0.1039, 0.99)]));
        chart.series.push(Series::new("3/s", vec![(0.1041, 0.5), (0.1052, 0.99)]));
        let svg = line_chart(&chart);
        let drawing = &svg[..svg.find("<details").expect("a data table")];
        let labels: Vec<&str> = drawing
            .split('>')
            .filter_map(|t| t.split('<').next())
            .map(str::trim)
            .filter(|t| t.ends_with(" ms"))
            .collect();
        assert!(labels.len() >= 3, "{labels:?}");
        let distinct: std::collections::BTreeSet<&str> = labels.iter().copied().collect();
        assert_eq!(distinct.len(), labels.len(), "repeated tick labels: {labels:?}");
    }

    #[test]
    fn nothing_to_draw_says_so() {
        let mut chart = LineChart::new("Empty", "x", "y");
        chart.series.push(Series::new("only NaN", vec![(f64::NAN, 1.0)]));
        assert!(line_chart(&chart).contains("nothing to draw"));
        assert!(tornado("T", "USD", 1.0, &[], |v| format!("{v}")).contains("nothing to draw"));
    }

    #[test]
    fn a_tornado_labels_each_input_and_its_ends() {
        let rows = vec![("requests".to_string(), 3.0, 1.0), ("training".to_string(), 1.5, 2.5)];
        let svg = tornado("Swing", "USD", 2.0, &rows, |v| format!("{v:.1}"));
        for text in ["requests", "training", "P10", "P90"] {
            assert!(svg.contains(text), "{text} missing");
        }
    }
}
