//! SVG charts drawn with plotters: horizontal bar charts, line charts over days, histograms.
//!
//! Charts are SVG text, so no font or image library is needed; plotters escapes every label,
//! which makes the markup safe to inline in an HTML page ([`crate::html::HtmlPage::chart`]).

use chrono::{Datelike, NaiveDate};
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::error::ReportError;
use crate::figures::{BYTE_UNITS, byte_unit, bytes, count};

/// What a chart's values are: it names the value axis, with the unit, and formats the labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unit<'a> {
    /// A count of things, named in the plural (`"reads"`, `"events"`).
    Count(&'a str),
    /// Bytes of what is named (`"bytes read"`): the axis is in the binary unit the largest value
    /// reaches (`GiB`, `TiB`).
    Bytes(&'a str),
    /// An amount of what is named (`"bookings"`) in a currency (`"USD"`).
    Money(&'a str, &'a str),
}

impl Unit<'_> {
    /// The divisor of values on an axis whose largest value is `max`, and the axis's description.
    fn axis(&self, max: f64) -> (f64, String) {
        match *self {
            Unit::Count(what) => (1.0, what.to_owned()),
            Unit::Bytes(what) => {
                let unit = byte_unit(max);
                (1024f64.powi(unit as i32), format!("{what} ({})", BYTE_UNITS[unit]))
            }
            Unit::Money(what, currency) => (1.0, format!("{what} ({currency})")),
        }
    }

    /// A value as its label says it: `1,234`, `5.91 GiB`, `12.34 USD`.
    pub(crate) fn label(&self, value: f64) -> String {
        match *self {
            Unit::Count(_) => count(value.max(0.0).round() as u64),
            Unit::Bytes(_) => bytes(value.max(0.0).round() as u64),
            Unit::Money(_, currency) => format!("{value:.2} {currency}"),
        }
    }

    /// A value as its label on a bar says it, in the unit of an axis whose largest value is
    /// `max` (one unit on a chart): `812 GiB`, `0.25 GiB`, `< 0.01 GiB`.
    pub(crate) fn label_on_axis(&self, value: f64, max: f64) -> String {
        match *self {
            Unit::Bytes(_) => {
                let unit = byte_unit(max);
                let v = value.max(0.0) / 1024f64.powi(unit as i32);
                let figure = match v {
                    0.0 => "0".to_owned(),
                    v if v < 0.01 => "< 0.01".to_owned(),
                    v if v < 10.0 => format!("{v:.2}"),
                    v if v < 100.0 => format!("{v:.1}"),
                    v => count(v.round() as u64),
                };
                format!("{figure} {}", BYTE_UNITS[unit])
            }
            _ => self.label(value),
        }
    }
}

/// An SVG chart and its title.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Svg {
    title: String,
    markup: String,
}

impl Svg {
    /// The chart's title.
    pub fn title(&self) -> &str {
        &self.title
    }

    /// The SVG document.
    pub fn markup(&self) -> &str {
        &self.markup
    }
}

/// One line of a [`line_chart`]: a value per day.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Series {
    /// Legend text.
    pub name: String,
    /// `(day, value)`, in any order; days without a point are drawn as 0.
    pub points: Vec<(NaiveDate, f64)>,
}

const WIDTH: u32 = 960;
/// Font size of tick labels and axis descriptions (plotters writes 0.8 of it as the SVG's pixels).
const LABEL_SIZE: u32 = 18;
/// Font size of titles.
const TITLE_SIZE: u32 = 24;
/// The colour of bars: the Okabe-Ito blue, the first line colour.
const BAR_COLOR: RGBColor = LINE_COLORS[0];
/// Longest label drawn in full; longer ones are shortened in the middle.
const LABEL_CHARS: usize = 48;

/// How many times the next bar the longest may be before it is drawn broken.
pub(crate) const BREAK_RATIO: f64 = 10.0;

/// A horizontal bar chart, one bar per `(label, value)`, first bar on top, each bar with its value
/// written at its end in the axis's unit ([`Unit::label_on_axis`]). A longest bar more than
/// [`BREAK_RATIO`] times the next is drawn broken (a gap across it, and the axis scaled to the
/// others), so that it does not flatten them; the axis's description says so.
pub(crate) fn bar_chart(title: &str, unit: Unit<'_>, bars: &[(String, f64)]) -> Result<Svg, ReportError> {
    let labels: Vec<String> = bars.iter().map(|(l, _)| shorten(l)).collect();
    let n = bars.len().max(1) as u32;
    let mut values: Vec<f64> = bars.iter().map(|(_, v)| *v).collect();
    values.sort_by(|a, b| b.total_cmp(a));
    let (longest, next) = (
        values.first().copied().unwrap_or(0.0),
        values.get(1).copied().unwrap_or(0.0),
    );
    let broken = next > 0.0 && longest > BREAK_RATIO * next;
    let max = if broken { next } else { longest };
    let (scale, mut desc) = unit.axis(max);
    if broken {
        desc.push_str("; the longest bar is broken, not to scale");
    }
    let top = axis_max(max / scale);
    let label_width = labels.iter().map(|l| l.chars().count()).max().unwrap_or(4) as u32 * 8 + 16;
    let height = 100 + 30 * n;
    draw(title, (WIDTH, height), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, ("sans-serif", TITLE_SIZE))
            .margin(12)
            .x_label_area_size(48)
            .y_label_area_size(label_width.min(WIDTH / 2))
            // Room at the right for the longest value label.
            // An integer range includes its end: `0..n - 1` is n segments, one per bar.
            .build_cartesian_2d(0.0..top * 1.25, (0u32..n - 1).into_segmented())?;
        // An en space keeps each name off the axis (SVG collapses plain trailing spaces).
        let label_of = |v: &SegmentValue<u32>| match v {
            SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => labels
                .get(n.saturating_sub(1 + i) as usize)
                .map(|l| format!("{l}\u{2002}"))
                .unwrap_or_default(),
            SegmentValue::Last => String::new(),
        };
        chart
            .configure_mesh()
            .disable_y_mesh()
            // No tick mark glued to a bar's name.
            .set_tick_mark_size(LabelAreaPosition::Left, 0)
            .y_labels(n as usize)
            .y_label_formatter(&label_of)
            .x_label_formatter(&|v| human(*v))
            .x_desc(desc)
            .label_style(("sans-serif", LABEL_SIZE))
            .axis_desc_style(("sans-serif", LABEL_SIZE))
            .draw()?;
        // A bar as drawn: its value, or the axis's end when it is broken.
        let drawn = |v: f64| (v / scale).min(top);
        chart.draw_series(
            Histogram::horizontal(&chart)
                .style(BAR_COLOR.filled())
                .margin(4)
                .data(bars.iter().enumerate().map(|(i, (_, v))| (n - 1 - i as u32, drawn(*v)))),
        )?;
        // The break: a white gap across each bar cut at the axis's end.
        chart.draw_series(
            bars.iter()
                .enumerate()
                .filter(|(_, (_, v))| *v / scale > top)
                .map(|(i, _)| {
                    let row = n - 1 - i as u32;
                    Rectangle::new(
                        [
                            (top * 0.86, SegmentValue::Exact(row)),
                            (top * 0.89, SegmentValue::Exact(row + 1)),
                        ],
                        WHITE.filled(),
                    )
                }),
        )?;
        let value_style =
            TextStyle::from(("sans-serif", LABEL_SIZE).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
        chart.draw_series(bars.iter().enumerate().map(|(i, (_, v))| {
            Text::new(
                format!(" {}", unit.label_on_axis(*v, max)),
                (drawn(*v), SegmentValue::CenterOf(n - 1 - i as u32)),
                value_style.clone(),
            )
        }))?;
        Ok(())
    })
}

/// A histogram of counts in labelled buckets, in the order given, every bucket labelled.
pub(crate) fn histogram(title: &str, unit: Unit<'_>, buckets: &[(String, f64)]) -> Result<Svg, ReportError> {
    column_chart(title, unit, buckets, None, (640, 360))
}

/// Steps between the ticks of an axis of hours: whole hours of the day, then whole days (at
/// midnight UTC).
pub(crate) const HOUR_STEPS: [i64; 12] = [1, 2, 3, 6, 12, 24, 48, 72, 168, 336, 720, 2160];
/// Steps between the ticks of an axis of days: each day, every other, then weeks.
pub(crate) const DAY_STEPS: [i64; 8] = [1, 2, 7, 14, 28, 56, 91, 364];

/// The ticks of an axis of `slots` (hours or days since the epoch, one per position, in order):
/// the positions whose slot is a multiple of the smallest step of `steps` that leaves at most
/// `max` of them, so that ticks fall on round hours or at midnight, never at an arbitrary slot.
pub(crate) fn ticks(slots: &[i64], steps: &[i64], max: usize) -> Vec<usize> {
    let on = |step: i64| -> Vec<usize> {
        slots
            .iter()
            .enumerate()
            .filter(|(_, slot)| slot.rem_euclid(step) == 0)
            .map(|(i, _)| i)
            .collect()
    };
    steps
        .iter()
        .map(|&step| on(step))
        .find(|ticks| ticks.len() <= max.max(1))
        .unwrap_or_else(|| on(*steps.last().unwrap_or(&1)))
}

/// Steps between the ticks of an axis of minutes: round minutes, then round hours.
pub(crate) const MINUTE_STEPS: [i64; 10] = [1, 2, 5, 10, 15, 30, 60, 120, 180, 360];

/// Minutes since the epoch of `t`, for [`ticks`] with [`MINUTE_STEPS`].
pub(crate) fn minute_slot(t: chrono::DateTime<chrono::Utc>) -> i64 {
    t.timestamp().div_euclid(60)
}

/// Hours since the epoch of `t`, for [`ticks`] with [`HOUR_STEPS`].
pub(crate) fn hour_slot(t: chrono::DateTime<chrono::Utc>) -> i64 {
    t.timestamp().div_euclid(3600)
}

/// Days of `day` since Monday 1970-01-05, for [`ticks`] with [`DAY_STEPS`]: weekly ticks fall on
/// Mondays.
pub(crate) fn day_slot(day: NaiveDate) -> i64 {
    i64::from(day.num_days_from_ce()) - 719_167
}

/// A series along the x axis (hours, days) as vertical bars in the order given, as wide as the
/// page, the labels of the bars at the positions `ticks` shown (see [`ticks`]).
pub(crate) fn series_chart(
    title: &str,
    unit: Unit<'_>,
    bars: &[(String, f64)],
    ticks: &[usize],
) -> Result<Svg, ReportError> {
    column_chart(title, unit, bars, Some(ticks), (WIDTH, 360))
}

/// Vertical bars in the order given, `size` pixels, the labels at the positions `ticks` or, with
/// none, every label.
fn column_chart(
    title: &str,
    unit: Unit<'_>,
    buckets: &[(String, f64)],
    ticks: Option<&[usize]>,
    size: (u32, u32),
) -> Result<Svg, ReportError> {
    let n = buckets.len().max(1) as u32;
    let max = buckets.iter().map(|(_, v)| *v).fold(0.0, f64::max);
    let (scale, desc) = unit.axis(max);
    draw(title, size, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, ("sans-serif", TITLE_SIZE))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(80)
            // An integer range includes its end: `0..n - 1` is n segments, one per bar.
            .build_cartesian_2d((0u32..n - 1).into_segmented(), 0.0..axis_max(max / scale))?;
        // Every bar is a key point; only the ticks' are labelled.
        let label_of = |v: &SegmentValue<u32>| match v {
            SegmentValue::CenterOf(i) | SegmentValue::Exact(i) if ticks.is_none_or(|t| t.contains(&(*i as usize))) => {
                buckets.get(*i as usize).map(|(l, _)| shorten(l)).unwrap_or_default()
            }
            _ => String::new(),
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n as usize)
            .x_label_formatter(&label_of)
            .y_label_formatter(&|v| human(*v))
            .y_desc(desc)
            .label_style(("sans-serif", LABEL_SIZE))
            .axis_desc_style(("sans-serif", LABEL_SIZE))
            .draw()?;
        chart.draw_series(
            Histogram::vertical(&chart)
                .style(BAR_COLOR.filled())
                .margin(if n > 48 { 1 } else { 6 })
                .data(buckets.iter().enumerate().map(|(i, (_, v))| (i as u32, *v / scale))),
        )?;
        Ok(())
    })
}

/// A line chart of values per day, one line per series, with a legend.
pub(crate) fn line_chart(title: &str, unit: Unit<'_>, series: &[Series]) -> Result<Svg, ReportError> {
    let day = |d: &NaiveDate| i64::from(d.num_days_from_ce());
    let lines: Vec<(&str, Vec<(i64, f64)>)> = series
        .iter()
        .map(|s| (s.name.as_str(), s.points.iter().map(|(d, v)| (day(d), *v)).collect()))
        .collect();
    let today = day(&chrono::Utc::now().date_naive());
    // Days from the common era, whose day 1 is a Monday: weekly ticks fall on Mondays.
    slot_line_chart(title, unit, &lines, today, (&DAY_STEPS, 1, 12), |slot| {
        NaiveDate::from_num_days_from_ce_opt(i32::try_from(slot).unwrap_or(i32::MAX))
            .map(|d| d.format("%m-%d").to_string())
            .unwrap_or_default()
    })
}

/// One line of an [`hourly_line_chart`]: a value per hour.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HourlySeries {
    /// Legend text.
    pub name: String,
    /// `(window start, value)`, in any order; hours without a point are drawn as 0.
    pub points: Vec<(chrono::DateTime<chrono::Utc>, f64)>,
}

/// A line chart of values per hour (windows starting on whole hours), one line per series.
pub(crate) fn hourly_line_chart(title: &str, unit: Unit<'_>, series: &[HourlySeries]) -> Result<Svg, ReportError> {
    let hour = |t: &chrono::DateTime<chrono::Utc>| t.timestamp().div_euclid(3600);
    let lines: Vec<(&str, Vec<(i64, f64)>)> = series
        .iter()
        .map(|s| (s.name.as_str(), s.points.iter().map(|(t, v)| (hour(t), *v)).collect()))
        .collect();
    let now = hour(&chrono::Utc::now());
    slot_line_chart(title, unit, &lines, now, (&HOUR_STEPS, 0, 10), |slot| {
        chrono::DateTime::from_timestamp(slot.saturating_mul(3600), 0)
            .map(|t| t.format("%m-%d %H:00").to_string())
            .unwrap_or_default()
    })
}

/// A line chart over consecutive slots (days, hours): `(name, [(slot, value)])` per line, slots
/// without a point drawn as 0, ticks `(steps, origin, at most)` chosen by [`ticks`] on the slots
/// counted from `origin`, each labelled `label(slot)`. `empty` is the slot shown when there is no
/// point at all. A legend names the lines when there are two or more (the title names one).
fn slot_line_chart(
    title: &str,
    unit: Unit<'_>,
    lines: &[(&str, Vec<(i64, f64)>)],
    empty: i64,
    (steps, origin, labels): (&[i64], i64, usize),
    label: impl Fn(i64) -> String,
) -> Result<Svg, ReportError> {
    let slots = lines
        .iter()
        .flat_map(|(_, points)| points.iter().map(|(slot, _)| *slot));
    let (first, last) = match (slots.clone().min(), slots.max()) {
        (Some(first), Some(last)) => (first, last),
        _ => (empty, empty),
    };
    // The slots drawn, and the axis (at least one slot wide, so that one slot is not a point on
    // an empty axis).
    let slots = (last - first).max(0);
    let span = slots.max(1);
    let max = lines
        .iter()
        .flat_map(|(_, points)| points.iter().map(|(_, v)| *v))
        .fold(0.0, f64::max);
    let (scale, desc) = unit.axis(max);
    let positions: Vec<i64> = (first - origin..=first - origin + span).collect();
    let key_points: Vec<i64> = ticks(&positions, steps, labels).into_iter().map(|i| i as i64).collect();
    draw(title, (WIDTH, 420), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, ("sans-serif", TITLE_SIZE))
            .margin(12)
            // Room for the last tick's label, centred on the axis' end.
            .margin_right(40)
            .x_label_area_size(40)
            .y_label_area_size(80)
            .build_cartesian_2d((0..span).with_key_points(key_points), 0.0..axis_max(max / scale))?;
        let label_of = |i: &i64| label(first + (*i).max(0));
        chart
            .configure_mesh()
            .x_label_formatter(&label_of)
            .y_label_formatter(&|v| human(*v))
            .y_desc(desc)
            .label_style(("sans-serif", LABEL_SIZE))
            .axis_desc_style(("sans-serif", LABEL_SIZE))
            .draw()?;
        for (k, (name, points)) in lines.iter().enumerate() {
            let mut values = vec![0.0; slots as usize + 1];
            for (slot, v) in points {
                if let Some(value) = values.get_mut((slot - first) as usize) {
                    *value += v / scale;
                }
            }
            let color = line_color(k);
            if let [only] = values[..] {
                // One slot: a mark, since a line needs two.
                chart.draw_series([Circle::new((0i64, only), 4, color.filled())])?;
            }
            chart
                .draw_series(LineSeries::new(
                    values.into_iter().enumerate().map(|(i, v)| (i as i64, v)),
                    color.stroke_width(2),
                ))?
                .label(shorten(name))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2)));
        }
        if lines.len() > 1 {
            chart
                .configure_series_labels()
                .label_font(("sans-serif", LABEL_SIZE))
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK.mix(0.3))
                .position(SeriesLabelPosition::UpperRight)
                .draw()?;
        }
        Ok(())
    })
}

/// The colours of lines, in order: the Okabe-Ito palette, which colour-blind readers tell apart,
/// without its yellow (too pale on white).
const LINE_COLORS: [RGBColor; 7] = [
    RGBColor(0x00, 0x72, 0xB2),
    RGBColor(0xE6, 0x9F, 0x00),
    RGBColor(0x00, 0x9E, 0x73),
    RGBColor(0xD5, 0x5E, 0x00),
    RGBColor(0xCC, 0x79, 0xA7),
    RGBColor(0x56, 0xB4, 0xE9),
    RGBColor(0x00, 0x00, 0x00),
];

/// The colour of the `k`-th line; after the seventh they repeat.
fn line_color(k: usize) -> RGBColor {
    LINE_COLORS[k % LINE_COLORS.len()]
}

/// Runs `body` on an SVG drawing area of `size` and returns the document.
fn draw(
    title: &str,
    size: (u32, u32),
    body: impl FnOnce(&DrawingArea<SVGBackend<'_>, plotters::coord::Shift>) -> Result<(), Box<dyn std::error::Error>>,
) -> Result<Svg, ReportError> {
    let error = |message: String| ReportError::Chart {
        chart: title.to_owned(),
        message,
    };
    let mut markup = String::new();
    {
        let root = SVGBackend::with_string(&mut markup, size).into_drawing_area();
        root.fill(&WHITE).map_err(|e| error(e.to_string()))?;
        body(&root).map_err(|e| error(e.to_string()))?;
        root.present().map_err(|e| error(e.to_string()))?;
    }
    Ok(Svg {
        title: title.to_owned(),
        markup,
    })
}

/// The top of a value axis: a little above the largest value, and never an empty range.
fn axis_max(max: f64) -> f64 {
    if max.is_finite() && max > 0.0 { max * 1.08 } else { 1.0 }
}

/// `label`, shortened in the middle to at most [`LABEL_CHARS`] characters.
fn shorten(label: &str) -> String {
    let count = label.chars().count();
    if count <= LABEL_CHARS {
        return label.to_owned();
    }
    let keep = (LABEL_CHARS - 1) / 2;
    let head: String = label.chars().take(keep).collect();
    let tail: String = label.chars().skip(count - keep).collect();
    format!("{head}…{tail}")
}

/// An axis number with an SI suffix: 950, 1.2k, 3.4M, 5.6G, 7.8T.
pub(crate) fn human(v: f64) -> String {
    let a = v.abs();
    let (scaled, suffix) = if a >= 1e12 {
        (v / 1e12, "T")
    } else if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let text = if scaled.fract().abs() < 1e-9 || scaled.abs() >= 10.0 {
        format!("{scaled:.0}")
    } else {
        format!("{scaled:.1}")
    };
    format!("{text}{suffix}")
}

/// What people read on a chart, for tests: the text of every `<text>` element, unescaped.
#[cfg(test)]
pub(crate) fn texts(svg: &Svg) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = svg.markup();
    while let Some(start) = rest.find("<text") {
        rest = &rest[start..];
        let (Some(open), Some(close)) = (rest.find('>'), rest.find("</text>")) else {
            break;
        };
        out.push(
            rest[open + 1..close]
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&quot;", "\"")
                .replace("&#39;", "'")
                .replace("&amp;", "&")
                .trim()
                .to_owned(),
        );
        rest = &rest[close..];
    }
    out
}

/// The bars of a chart, for tests: `(x, y, width, height)` of every rectangle in the bar colour,
/// in the order drawn.
#[cfg(test)]
pub(crate) fn bars_of(svg: &Svg) -> Vec<(f64, f64, f64, f64)> {
    let fill = format!("fill=\"#{:02X}{:02X}{:02X}\"", BAR_COLOR.0, BAR_COLOR.1, BAR_COLOR.2);
    let attr = |rect: &str, name: &str| -> f64 {
        rect.split(&format!(" {name}=\""))
            .nth(1)
            .and_then(|v| v.split('"').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(f64::NAN)
    };
    svg.markup()
        .split("<rect")
        .skip(1)
        .map(|r| &r[..r.find("/>").unwrap_or(r.len())])
        .filter(|r| r.to_ascii_uppercase().contains(&fill.to_ascii_uppercase()))
        .map(|r| (attr(r, "x"), attr(r, "y"), attr(r, "width"), attr(r, "height")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(svg: &Svg, needle: &str) -> usize {
        svg.markup().matches(needle).count()
    }

    fn texts_of(svg: &Svg, text: &str) -> bool {
        texts(svg).iter().any(|t| t == text)
    }

    #[test]
    fn bar_chart_draws_a_bar_and_a_label_per_value() {
        let bars = vec![
            ("analytics/events/clicks/".to_owned(), 120.0),
            ("<script>alert(1)</script>".to_owned(), 30.0),
            ("snapshots/customers/".to_owned(), 0.0),
        ];
        let svg = bar_chart("Top datasets", Unit::Count("reads"), &bars).unwrap();
        assert!(svg.markup().starts_with("<svg"), "{}", svg.markup());
        assert!(svg.markup().contains("analytics/events/clicks/"));
        assert!(svg.markup().contains("&lt;script&gt;"));
        assert!(!svg.markup().contains("<script>"));
        assert!(svg.markup().contains("Top datasets"));
        // Two non-empty bars (the zero bar has no area).
        assert!(count(&svg, "<rect") >= 3, "{}", svg.markup());
        // Each label once, on its own bar: no segment beyond the last bar repeats one.
        for label in ["analytics/events/clicks/", "&lt;script&gt;", "snapshots/customers/"] {
            assert_eq!(count(&svg, label), 1, "{label}: {}", svg.markup());
        }
        // Each bar says its value; the axis names what is counted.
        let texts = texts(&svg);
        for value in ["120", "30", "0"] {
            assert!(texts.iter().any(|t| t == value), "{value}: {texts:?}");
        }
        assert!(texts.iter().any(|t| t == "reads"), "{texts:?}");
        // Bars are as long as their values say (the zero bar too, with no length).
        let mut bars = bars_of(&svg);
        bars.sort_by(|a, b| a.1.total_cmp(&b.1));
        assert_eq!(bars.len(), 3, "{bars:?}");
        assert!((bars[0].2 / bars[1].2 - 4.0).abs() < 0.1, "{bars:?}");
    }

    #[test]
    fn units_name_the_axis_and_format_the_values() {
        let gib = (1u64 << 30) as f64;
        let svg = bar_chart(
            "Bytes",
            Unit::Bytes("bytes read"),
            &[("a".into(), 5.91 * gib), ("b".into(), gib)],
        )
        .unwrap();
        let texts = texts(&svg);
        assert!(texts.iter().any(|t| t == "bytes read (GiB)"), "{texts:?}");
        assert!(texts.iter().any(|t| t == "5.91 GiB"), "{texts:?}");
        // Ticks count GiB: 0, 1, 2, ... not raw bytes.
        assert!(texts.iter().any(|t| t == "5"), "{texts:?}");
        let svg = series_chart("Bookings", Unit::Money("bookings", "USD"), &[("h".into(), 12.5)], &[0]).unwrap();
        assert!(texts_of(&svg, "bookings (USD)"));
        assert_eq!(Unit::Money("bookings", "USD").label(12.345), "12.35 USD");
        assert_eq!(Unit::Count("reads").label(1234.0), "1,234");
    }

    #[test]
    fn a_bar_far_longer_than_the_rest_is_broken_and_every_label_is_in_the_axis_unit() {
        let (kib, gib, tib) = (1024.0, (1u64 << 30) as f64, (1u64 << 40) as f64);
        let bars = [
            ("logs/".to_owned(), 137.0 * tib),
            ("events/".to_owned(), 12.0 * gib),
            ("models/".to_owned(), 3.5 * gib),
            ("exports/".to_owned(), 5.0 * kib),
        ];
        let svg = bar_chart("Bytes read per dataset", Unit::Bytes("bytes read"), &bars).unwrap();
        let texts = texts(&svg);
        assert!(
            texts
                .iter()
                .any(|t| t == "bytes read (GiB); the longest bar is broken, not to scale"),
            "{texts:?}"
        );
        for label in ["140,288 GiB", "12.0 GiB", "3.50 GiB", "< 0.01 GiB"] {
            assert!(texts.iter().any(|t| t == label), "{label}: {texts:?}");
        }
        assert!(
            !texts.iter().any(|t| t.contains("TiB") || t.contains("KiB")),
            "{texts:?}"
        );
        // The broken bar ends at the axis's end, the next ones keep their proportion.
        let mut drawn = bars_of(&svg);
        drawn.sort_by(|a, b| a.1.total_cmp(&b.1));
        assert!(drawn[0].2 < drawn[1].2 * 1.2, "{drawn:?}");
        assert!((drawn[1].2 / drawn[2].2 - 12.0 / 3.5).abs() < 0.1, "{drawn:?}");
        // Without a dominant bar, nothing is broken.
        let svg = bar_chart("Bytes", Unit::Bytes("bytes read"), &bars[1..]).unwrap();
        assert!(texts_of(&svg, "bytes read (GiB)"), "{:?}", super::texts(&svg));
    }

    #[test]
    fn time_axes_tick_at_round_hours_and_midnight() {
        // Four days from 05:00: every 12 hours, at midnight and noon.
        let start = chrono::DateTime::parse_from_rfc3339("2026-11-20T05:00:00Z")
            .unwrap()
            .to_utc();
        let slots: Vec<i64> = (0..96).map(|h| hour_slot(start) + h).collect();
        let ticks_at = ticks(&slots, &HOUR_STEPS, 10);
        assert_eq!(ticks_at.first(), Some(&7), "the first noon");
        assert!(ticks_at.iter().all(|&i| slots[i] % 12 == 0), "{ticks_at:?}");
        // Ten days at most five ticks: every other midnight.
        let slots: Vec<i64> = (0..240).map(|h| hour_slot(start) + h).collect();
        assert!(ticks(&slots, &HOUR_STEPS, 5).iter().all(|&i| slots[i] % 48 == 0));
        let series = [HourlySeries {
            name: "all platforms".into(),
            points: (0..96).map(|h| (start + chrono::TimeDelta::hours(h), 1.0)).collect(),
        }];
        let svg = hourly_line_chart("Bookings per hour", Unit::Money("bookings", "USD"), &series).unwrap();
        let labels: Vec<String> = texts(&svg).into_iter().filter(|t| t.starts_with("11-")).collect();
        assert!(labels.len() >= 7, "{labels:?}");
        assert!(
            labels.iter().all(|l| l.ends_with(" 00:00") || l.ends_with(" 12:00")),
            "{labels:?}"
        );
        // One line: the title names it, no legend.
        assert!(!texts_of(&svg, "all platforms"), "{:?}", texts(&svg));
        // Days: weekly ticks on Mondays over eight weeks.
        let monday = NaiveDate::from_ymd_opt(2026, 11, 2).unwrap();
        let days: Vec<i64> = (0..56).map(|d| day_slot(monday) + d).collect();
        let weekly = ticks(&days, &DAY_STEPS, 10);
        assert_eq!(weekly.len(), 8, "{weekly:?}");
        assert!(
            weekly
                .iter()
                .all(|&i| (monday + chrono::Days::new(i as u64)).weekday() == chrono::Weekday::Mon)
        );
    }

    #[test]
    fn histogram_and_line_chart() {
        let buckets: Vec<(String, f64)> = ["0", "1-6", "7-29"]
            .iter()
            .zip([5.0, 3.0, 1.0])
            .map(|(l, v)| ((*l).to_owned(), v))
            .collect();
        let svg = histogram("Age of data read", Unit::Count("reads"), &buckets).unwrap();
        for label in ["1-6", "7-29", "Age of data read"] {
            assert!(svg.markup().contains(label), "{label}");
        }
        // A series of 96 hours: vertical bars across a page wider than tall, a few labels.
        let hours: Vec<(String, f64)> = (0..96).map(|h| (format!("h{h:02}"), f64::from(h % 24))).collect();
        let slots: Vec<i64> = (0..96).collect();
        let svg = series_chart(
            "Events per hour",
            Unit::Count("events"),
            &hours,
            &ticks(&slots, &HOUR_STEPS, 12),
        )
        .unwrap();
        assert!(
            svg.markup().starts_with("<svg width=\"960\" height=\"360\""),
            "{}",
            &svg.markup()[..80]
        );
        let shown = hours.iter().filter(|(l, _)| svg.markup().contains(l.as_str())).count();
        assert!((2..=13).contains(&shown), "{shown} labels: {}", svg.markup());
        assert!(count(&svg, "<rect") >= 95, "a bar per hour with events");
        let day = |d| NaiveDate::from_ymd_opt(2024, 6, d).unwrap();
        let series = vec![
            Series {
                name: "events/".into(),
                points: vec![(day(1), 3.0), (day(3), 5.0)],
            },
            Series {
                name: "snapshots/".into(),
                points: vec![(day(2), 1.0)],
            },
        ];
        let svg = line_chart("Reads per day", Unit::Count("reads"), &series).unwrap();
        assert_eq!(
            count(&svg, "stroke-width=\"2\" points="),
            2 + 2,
            "two lines and two legend marks"
        );
        assert!(
            svg.markup().contains("points=\"92,187 505,367 919,67 \""),
            "3, 0 and 5 reads"
        );
        assert!(svg.markup().contains("06-01") && svg.markup().contains("snapshots/"));
        // Lines in colours apart: the palette's first two, no pale yellow.
        let markup = svg.markup().to_ascii_uppercase();
        assert!(markup.contains("#0072B2") && markup.contains("#E69F00"), "{markup}");
        assert!(!markup.contains("#FFFF00") && !markup.contains("#F0E442"));
        // One hour is a mark, not a line falling to an hour without data.
        let hour = chrono::DateTime::from_timestamp(1_717_243_200, 0).unwrap();
        let one = HourlySeries {
            name: "all".into(),
            points: vec![(hour, 800.0)],
        };
        let svg = hourly_line_chart("Bookings", Unit::Money("bookings", "USD"), &[one]).unwrap();
        assert_eq!(count(&svg, "<circle"), 1, "{}", svg.markup());
        assert_eq!(
            count(&svg, "stroke-width=\"2\" points=\"92,"),
            1,
            "the series' line has one point"
        );
        // Nothing to draw is still a chart.
        assert!(
            line_chart("Empty", Unit::Count("reads"), &[])
                .unwrap()
                .markup()
                .starts_with("<svg")
        );
        assert!(
            bar_chart("Empty", Unit::Count("reads"), &[])
                .unwrap()
                .markup()
                .starts_with("<svg")
        );
    }

    #[test]
    fn numbers_and_labels_for_axes() {
        assert_eq!(human(950.0), "950");
        assert_eq!(human(1200.0), "1.2k");
        assert_eq!(human(34_000_000.0), "34M");
        assert_eq!(human(2.5), "2.5");
        let long = "a/".repeat(40);
        assert!(shorten(&long).chars().count() <= LABEL_CHARS);
        assert_eq!(shorten("short/"), "short/");
        assert!(shorten(&long).contains('…'));
    }
}
