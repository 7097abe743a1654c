//! The access report as text, JSON and an HTML page with charts.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use chrono::{DateTime, NaiveDate, Utc};
use serde_json::{Value, json};

use super::inventory::Count;
use super::{AGE_BUCKETS, AccessReport, Advice, DatasetUsage, Storage, UnusedDataset, advisor, day_span};
use crate::chart::{self, Series, Unit};
use crate::error::ReportError;
use crate::figures::{bytes, count, money, percent as share};
use crate::html::{HtmlPage, ReportDir};
use crate::text::TextTable;

/// The section each chart is drawn in, as `(start of the chart's file name, start of the
/// section's title)`.
const CHART_SECTIONS: [(&str, &str); 6] = [
    ("top-datasets", "Most used"),
    ("reads-per-day", "Most used"),
    ("stored", "Stored per dataset"),
    ("ages", "Age of the data read"),
    ("hygiene", "Access hygiene"),
    ("delivery", "Log completeness"),
];

/// Datasets the per-day table and chart show at most.
const DAILY_DATASETS: usize = 5;

impl AccessReport {
    /// The report as pretty-printed JSON: `{"datasets": [...], "unused": [...], "advice": [...]}`.
    pub fn to_json(&self) -> Result<String, ReportError> {
        serde_json::to_string_pretty(self).map_err(|e| ReportError::InvalidArgument {
            argument: "--format".to_owned(),
            value: "json".to_owned(),
            reason: format!("the report cannot be written as JSON: {e}"),
        })
    }

    /// The report as plain-text sections.
    pub fn render_text(&self) -> String {
        let mut out = String::from("ACCESS PATTERNS\n\n");
        for (what, value) in self.headline_figures() {
            let _ = writeln!(out, "{what}: {value}");
        }
        out.push('\n');
        for (title, body) in self.sections() {
            let _ = writeln!(out, "{title}\n");
            match body {
                Body::Text(text) => {
                    let _ = writeln!(out, "{text}\n");
                }
                Body::Table(table) => {
                    if table.is_empty() {
                        let _ = writeln!(out, "(none)\n");
                    } else {
                        let _ = writeln!(out, "{}", table.render());
                    }
                }
                Body::Blocks(blocks) => {
                    for (name, text) in blocks {
                        let _ = writeln!(out, "{name}:\n{text}\n");
                    }
                }
            }
        }
        out
    }

    /// Writes `index.html` (tables and the charts inline), the charts as SVG files, the JSON
    /// report and one lifecycle configuration per bucket into `dir`; returns the page's path.
    pub fn write_html(&self, dir: &ReportDir) -> Result<PathBuf, ReportError> {
        let mut page = HtmlPage::new("Access patterns");
        page.headline(&self.headline_figures());
        let charts = self.charts()?;
        for (title, body) in self.sections() {
            page.heading(&title);
            let here = |name: &str| {
                CHART_SECTIONS
                    .iter()
                    .any(|(chart, section)| name.starts_with(chart) && title.starts_with(section))
            };
            for (name, svg) in charts.iter().filter(|(name, _)| here(name)) {
                dir.write_chart(name, svg)?;
                page.chart(svg);
            }
            match body {
                Body::Text(text) => {
                    for paragraph in text.split("\n\n") {
                        page.paragraph(paragraph);
                    }
                }
                Body::Table(table) => {
                    if table.is_empty() {
                        page.paragraph("(none)");
                    } else {
                        page.table(&table);
                    }
                }
                Body::Blocks(blocks) => {
                    for (name, text) in blocks {
                        page.paragraph(&name);
                        page.preformatted(&text);
                    }
                }
            }
        }
        dir.write("report.json", &self.to_json()?)?;
        let configurations = self.lifecycle_by_bucket();
        if !configurations.is_empty() {
            page.heading("Lifecycle configuration files");
            page.paragraph(
                "One file per bucket with the rules of all its datasets. put-bucket-lifecycle-configuration \
                 replaces a bucket's whole configuration: merge these rules with the bucket's existing ones first.",
            );
            let mut files = TextTable::new(["bucket", "file", "apply with"]);
            for (bucket, configuration) in configurations {
                let name = format!("lifecycle-{}.json", file_safe(&bucket));
                write_json(dir, &name, &configuration)?;
                files.push([
                    bucket.clone(),
                    name.clone(),
                    format!(
                        "aws s3api put-bucket-lifecycle-configuration --bucket {bucket} --lifecycle-configuration \
                         file://{name}"
                    ),
                ]);
            }
            page.table(&files);
        }
        if let Some(objects) = &self.objects {
            let folder = dir.path().join("manifests");
            let written = super::objects::write_manifests(objects, &folder).map_err(|source| ReportError::Write {
                path: folder.clone(),
                source,
            })?;
            if !written.is_empty() {
                page.heading("S3 Batch Operations manifests");
                page.paragraph(
                    "The unread objects to act on, one CSV (bucket, key, version) per bucket, action and class: a \
                     Batch Operations copy job with that storage class for a transition, a deletion job for an \
                     expiration.",
                );
                let mut files = TextTable::new(["file", "objects"]);
                for path in written {
                    let lines = std::fs::read_to_string(&path).map_or(0, |t| t.lines().count());
                    let name = path.strip_prefix(dir.path()).unwrap_or(&path).display().to_string();
                    files.push([name, count(lines as u64)]);
                }
                page.table(&files);
            }
        }
        let tierings: Vec<(&Advice, &Value)> = self
            .advice
            .iter()
            .filter_map(|a| Some((a, a.intelligent_tiering_configuration()?)))
            .collect();
        if !tierings.is_empty() {
            page.heading("Intelligent-Tiering configuration files");
            page.paragraph(
                "One file per dataset whose plan turns on an archive tier of S3 Intelligent-Tiering; each is a \
                 configuration of its own (by its Id) and leaves the bucket's others as they are. Apply it with the \
                 lifecycle rule that moves the dataset into the class.",
            );
            let mut files = TextTable::new(["bucket", "dataset", "file", "apply with"]);
            for (a, configuration) in tierings {
                let id = configuration["Id"].as_str().unwrap_or_default();
                let name = format!("intelligent-tiering-{}-{}.json", file_safe(&a.bucket), file_safe(id));
                write_json(dir, &name, configuration)?;
                files.push([
                    a.bucket.clone(),
                    a.dataset.clone(),
                    name.clone(),
                    format!(
                        "aws s3api put-bucket-intelligent-tiering-configuration --bucket {} --id {id} \
                         --intelligent-tiering-configuration file://{name}",
                        a.bucket
                    ),
                ]);
            }
            page.table(&files);
        }
        dir.write("index.html", &page.finish())
    }

    /// The headline as `(what, value)` for people.
    fn headline_figures(&self) -> Vec<(&'static str, String)> {
        let h = &self.headline;
        let range = match (&h.first_day, &h.last_day) {
            (Some(first), Some(last)) => format!("{first} to {last} ({})", plural(u64::from(h.days), "day")),
            _ => "no request".to_owned(),
        };
        vec![
            ("Range", range),
            ("Datasets", count(h.datasets)),
            ("Reads (GET, HEAD, copy sources)", count(h.reads)),
            ("Reads of the current day's data", share(h.current_day_read_share)),
            (
                "Stored in unused datasets",
                format!("{} in {}", bytes(h.unused_bytes), plural(h.unused_datasets, "dataset")),
            ),
            ("Storage-class savings a month", money(h.monthly_saving, &h.currency)),
        ]
        .into_iter()
        .chain(h.stored_bytes.map(|b| ("Stored (S3 Inventory)", bytes(b))))
        .chain(self.storage.as_ref().map(|s| {
            (
                "Dark data (never requested)",
                format!(
                    "{} in {}, {} a month",
                    bytes(s.dark.bytes),
                    plural(s.dark.datasets, "dataset"),
                    money(s.dark.monthly_storage_cost, &h.currency)
                ),
            )
        }))
        .collect()
    }

    /// One lifecycle configuration per bucket with the rules of every dataset advised to move.
    pub fn lifecycle_by_bucket(&self) -> BTreeMap<String, Value> {
        let mut rules: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        for advice in self.advice.iter().filter(|a| a.lifecycle.is_some()) {
            let list = rules.entry(advice.bucket.clone()).or_default();
            let mut rule = advisor::lifecycle_rule(&advice.bucket, &advice.dataset, &advice.transitions);
            let id = rule["ID"].as_str().unwrap_or_default().to_owned();
            let taken = |candidate: &str| list.iter().any(|r| r["ID"] == candidate);
            if taken(&id) {
                let unique = (2..).map(|n| format!("{id}-{n}")).find(|c| !taken(c)).unwrap_or(id);
                rule["ID"] = Value::String(unique);
            }
            list.push(rule);
        }
        rules
            .into_iter()
            .map(|(bucket, rules)| (bucket, json!({ "Rules": rules })))
            .collect()
    }

    /// The sections shared by the text and the HTML page.
    fn sections(&self) -> Vec<(String, Body)> {
        let s = &self.summary;
        let mut sections = Vec::new();
        let (start, end) = match (s.start_day, s.end_day) {
            (Some(a), Some(b)) => (a.to_string(), b.to_string()),
            _ => (String::from("…"), String::from("…")),
        };
        let rule = match s.rule.regex() {
            Some(regex) => format!(
                "the start of the key the regex {} matches (its first group), else up to the first partition-like \
                 directory (name=value or a date), else {} directories",
                regex.as_str(),
                s.rule.depth()
            ),
            None => format!(
                "the key up to the first partition-like directory (name=value or a date), else {} directories",
                s.rule.depth()
            ),
        };
        let mut intro = format!(
            "From {start} to {end} ({}): {} successful object requests, of which {} reads (GET, HEAD and \
             the sources of copies); the others are writes, deletes, lifecycle actions and other \
             operations.\n\nA dataset is a bucket and a key prefix: {rule}.",
            plural(u64::from(s.range_days), "day"),
            count(s.requests),
            count(self.headline.reads)
        );
        if let Some(first) = s
            .logs_first_day
            .filter(|first| s.start_day.is_some_and(|start| *first > start))
        {
            let _ = write!(
                intro,
                "\n\nThe logs go back to {first} only ({}): nothing before is known, so a dataset or \
                 object \"not read\" was not read since then.",
                plural(u64::from(s.window_days), "day")
            );
        }
        if s.requests == 0 {
            intro.push_str("\n\nNo successful object request in the range: nothing to report.");
        }
        sections.push(("Summary".to_owned(), Body::Text(intro)));
        if s.requests == 0 {
            return sections;
        }

        let mut used = TextTable::new([
            "bucket",
            "dataset",
            "reads",
            "read bytes",
            "requesters",
            "writes",
            "lifecycle",
            "first read",
            "last read",
        ]);
        for d in &self.datasets {
            used.push([
                d.bucket.clone(),
                d.dataset.clone(),
                count(d.reads),
                bytes(d.read_bytes),
                count(d.requesters),
                count(d.writes),
                count(d.lifecycle),
                day(d.first_read),
                day(d.last_read),
            ]);
        }
        sections.push(("Most used datasets".to_owned(), Body::Table(used)));

        let mut daily =
            TextTable::new(std::iter::once("day".to_owned()).chain(self.daily_top().iter().map(|d| label(d))));
        let top = self.daily_top();
        let mut per_day: BTreeMap<NaiveDate, Vec<u64>> = BTreeMap::new();
        for u in &self.days {
            if let Some(i) = top.iter().position(|d| d.bucket == u.bucket && d.dataset == u.dataset) {
                per_day.entry(u.day).or_insert_with(|| vec![0; top.len()])[i] += u.reads;
            }
        }
        for (d, reads) in per_day {
            daily.push(std::iter::once(d.to_string()).chain(reads.into_iter().map(count)));
        }
        sections.push((
            format!("Reads per day (the {} most read datasets)", top.len()),
            Body::Table(daily),
        ));

        let mut ages = TextTable::new(
            ["bucket", "dataset"]
                .into_iter()
                .map(str::to_owned)
                .chain(AGE_BUCKETS.iter().map(|(l, _, _)| format!("{l} d")))
                .chain(["unknown".to_owned(), "current day".to_owned()]),
        );
        let mut all = super::AgeHistogram::default();
        let mut unknown = 0;
        for d in self.datasets.iter().filter(|d| d.reads > 0) {
            for (k, n) in d.age_days.counts().iter().enumerate() {
                all.add(AGE_BUCKETS[k].1, *n);
            }
            unknown += d.reads_of_unknown_age;
            ages.push(
                [d.bucket.clone(), d.dataset.clone()]
                    .into_iter()
                    .chain(d.age_days.counts().into_iter().map(count))
                    .chain([count(d.reads_of_unknown_age), share(d.current_day_share())]),
            );
        }
        let overall = (all.total() > 0).then(|| all.current_day as f64 / all.total() as f64);
        ages.push(
            ["(all)".to_owned(), String::new()]
                .into_iter()
                .chain(all.counts().into_iter().map(count))
                .chain([count(unknown), share(overall)]),
        );
        sections.push((
            "Age of the data read (days from the key's date, else from the key's first write seen, to the read)"
                .to_owned(),
            Body::Table(ages),
        ));

        sections.push((
            if s.unused_days_applied < s.unused_days {
                format!(
                    "Unused datasets (written, not read in the logs' {}: they are shorter than the {} of \
                     --unused-days, which need that many days of logs)",
                    plural(u64::from(s.unused_days_applied), "day"),
                    plural(u64::from(s.unused_days), "day")
                )
            } else {
                format!("Unused datasets (written, not read for {} days or more)", s.unused_days)
            },
            Body::Table(unused_table(&self.unused)),
        ));

        let (region, currency, source) = &s.prices;
        if let Some(storage) = &self.storage {
            let lists: Vec<String> = storage
                .inventories
                .iter()
                .map(|i| {
                    format!(
                        "{} ({}, taken {}: {} objects, {})",
                        i.bucket,
                        i.format,
                        i.taken.format("%Y-%m-%d %H:%M UTC"),
                        count(i.objects),
                        bytes(i.bytes)
                    )
                })
                .collect();
            let d = &storage.dark;
            let mut dark = format!(
                "{} in {} ({} objects) stored and never requested in the range, costing {} a month in storage.",
                bytes(d.bytes),
                plural(d.datasets, "dataset"),
                count(d.objects),
                money(d.monthly_storage_cost, currency)
            );
            if !d.unpriced_classes.is_empty() {
                let _ = write!(
                    dark,
                    " The price table has no price for {}: those bytes are not in the cost.",
                    d.unpriced_classes.join(", ")
                );
            }
            sections.push((
                "Stored objects (S3 Inventory)".to_owned(),
                Body::Text(format!(
                    "Every object version the inventory lists (delete markers are not objects), by the \
                     report's datasets: {}.\n\n{dark}",
                    lists.join("; ")
                )),
            ));
            sections.push((
                "Stored per dataset".to_owned(),
                Body::Table(stored_table(storage, currency)),
            ));
            let mut never = TextTable::new(["bucket", "dataset", "objects", "bytes", "classes", "storage / month"]);
            for d in storage.datasets.iter().filter(|d| d.requests == 0) {
                never.push([
                    d.bucket.clone(),
                    d.dataset.clone(),
                    count(d.objects),
                    bytes(d.bytes),
                    classes(&d.by_class),
                    money(d.monthly_storage_cost, currency),
                ]);
            }
            sections.push((
                "Dark data (stored, never requested in the range)".to_owned(),
                Body::Table(never),
            ));
        }
        let stored_from = match &self.storage {
            Some(storage) => format!(
                "Stored data of {} is every object their S3 Inventory lists; of other buckets it is estimated from the \
                 logs: keys seen written or read and not deleted since, at the largest object_size logged (objects no \
                 request touched are not counted).",
                storage
                    .inventories
                    .iter()
                    .map(|i| i.bucket.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None => "Stored data is estimated from the logs: keys seen written or read and not deleted since, at the \
                     largest object_size logged; objects no request touched are not counted (give --inventory for \
                     exact figures)."
                .to_owned(),
        };
        sections.push((
            "Storage-class advice".to_owned(),
            Body::Text(format!(
                "Prices: {region}, {currency} ({source}). Reads become rare at the age from which at most {:.0}% of \
                 the reads happen. {stored_from} Monthly figures scale the {} of reads to 30 days.",
                s.rare_share * 100.0,
                plural(u64::from(s.range_days), "day")
            )),
        ));
        sections.push(("Advice per dataset".to_owned(), Body::Table(advice_table(&self.advice))));
        sections.push((
            "Why".to_owned(),
            Body::Text(
                self.advice
                    .iter()
                    .map(|a| format!("{}: {}.", label_of(&a.bucket, &a.dataset), a.reason))
                    .collect::<Vec<_>>()
                    .join("\n\n"),
            ),
        ));
        let mut expire = TextTable::new([
            "bucket",
            "dataset",
            "expire after",
            "oldest data read",
            "read by",
            "objects",
            "bytes",
            "storage saved / month",
        ]);
        for a in &self.advice {
            let Some(e) = &a.expiration else { continue };
            expire.push([
                a.bucket.clone(),
                a.dataset.clone(),
                format!("{} d", e.days),
                e.oldest_read_days.map_or_else(
                    || format!("none read in the {}", plural(u64::from(s.range_days), "day")),
                    |d| format!("{d} d (+{} d margin)", e.margin_days),
                ),
                e.readers
                    .iter()
                    .take(3)
                    .map(|r| format!("{} ({} d)", short_requester(&r.requester), r.oldest_days))
                    .collect::<Vec<_>>()
                    .join("; "),
                count(e.objects),
                bytes(e.bytes),
                money(e.monthly_saving, &a.currency),
            ]);
        }
        sections.push((
            "Expiration proposals (no reader of the range read data this old; deleting is the data owner's call, so \
             these rules are not in the lifecycle files)"
                .to_owned(),
            Body::Table(expire),
        ));
        let blocks = json_blocks(&self.advice, |a| a.lifecycle.as_ref());
        if !blocks.is_empty() {
            sections.push((
                "Lifecycle rules (aws s3api put-bucket-lifecycle-configuration --lifecycle-configuration)".to_owned(),
                Body::Blocks(blocks),
            ));
        }
        let blocks = json_blocks(&self.advice, Advice::intelligent_tiering_configuration);
        if !blocks.is_empty() {
            sections.push((
                "Intelligent-Tiering archive tiers (aws s3api put-bucket-intelligent-tiering-configuration \
                 --intelligent-tiering-configuration)"
                    .to_owned(),
                Body::Blocks(blocks),
            ));
        }

        let mut checks = TextTable::new(["check", "requests", "requesters", "first request ids"]);
        for c in &self.hygiene.checks {
            let who: Vec<String> = c
                .requesters
                .iter()
                .map(|r| format!("{} ({})", r.requester, count(r.requests)))
                .collect();
            checks.push([
                c.finds.clone(),
                count(c.requests),
                who.join("; "),
                c.sample_request_ids.join(" "),
            ]);
        }
        sections.push((
            "Access hygiene (every logged request of the range, failed ones too)".to_owned(),
            Body::Table(checks),
        ));
        let mut forbidden = TextTable::new(["bucket", "dataset", "requester", "refused (403)", "first request ids"]);
        for f in &self.hygiene.forbidden {
            forbidden.push([
                f.bucket.clone(),
                f.dataset.clone(),
                f.requester.clone(),
                count(f.requests),
                f.sample_request_ids.join(" "),
            ]);
        }
        sections.push(("403 hot spots".to_owned(), Body::Table(forbidden)));

        let minutes = |m: Option<f64>| m.map_or_else(|| "-".to_owned(), duration);
        let mut complete = TextTable::new([
            "bucket",
            "records",
            "log objects",
            "delivery (median / max)",
            "to ingestion (median / max)",
            "hours without records",
            "first empty hours",
            "duplicate request ids",
        ]);
        for c in &self.completeness {
            complete.push([
                c.bucket.clone(),
                count(c.records),
                count(c.log_objects),
                format!(
                    "{} / {}",
                    minutes(c.delivery.median_minutes),
                    minutes(c.delivery.max_minutes)
                ),
                format!(
                    "{} / {}",
                    minutes(c.ingestion.median_minutes),
                    minutes(c.ingestion.max_minutes)
                ),
                format!("{} of {}", count(c.hours_without_records), count(c.hours)),
                c.first_empty_hours
                    .iter()
                    .map(|h| h.format("%Y-%m-%d %H:00").to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                if c.sample_duplicates.is_empty() {
                    "0".to_owned()
                } else {
                    format!(
                        "{} (e.g. {})",
                        count(c.duplicate_request_ids),
                        c.sample_duplicates.join(" ")
                    )
                },
            ]);
        }
        sections.push((
            "Log completeness (S3 delivers server access logs best-effort)".to_owned(),
            Body::Table(complete),
        ));
        if let Some(objects) = &self.objects {
            sections.extend(object_sections(objects));
        }
        sections
    }

    /// The datasets of the per-day table and chart: the most read ones.
    fn daily_top(&self) -> Vec<&DatasetUsage> {
        self.datasets
            .iter()
            .filter(|d| d.reads > 0)
            .take(DAILY_DATASETS.min(self.summary.top.max(1)))
            .collect()
    }

    /// The charts of the page, with their file names.
    fn charts(&self) -> Result<Vec<(String, chart::Svg)>, ReportError> {
        let mut charts = Vec::new();
        let mut bars: Vec<(String, f64)> = self
            .hygiene
            .checks
            .iter()
            .map(|c| (check_label(&c.check).to_owned(), c.requests as f64))
            .collect();
        bars.push((
            "refused (403)".to_owned(),
            self.hygiene.forbidden.iter().map(|f| f.requests).sum::<u64>() as f64,
        ));
        charts.push((
            "hygiene.svg".to_owned(),
            chart::bar_chart("Requests a bucket owner should look at", Unit::Count("requests"), &bars)?,
        ));
        let bars: Vec<(String, f64)> = self
            .completeness
            .iter()
            .flat_map(|c| {
                [
                    (format!("{} median", c.bucket), c.delivery.median_minutes),
                    (format!("{} max", c.bucket), c.delivery.max_minutes),
                ]
            })
            .filter_map(|(name, minutes)| Some((name, minutes?)))
            .collect();
        if !bars.is_empty() {
            charts.push((
                "delivery-delay.svg".to_owned(),
                chart::bar_chart("Delay from request to log object", Unit::Count("minutes"), &bars)?,
            ));
        }
        if let Some(storage) = &self.storage {
            let bars: Vec<(String, f64)> = storage
                .datasets
                .iter()
                .take(self.summary.top.max(1))
                .map(|d| {
                    let name = label_of(&d.bucket, &d.dataset);
                    let name = if d.requests == 0 {
                        format!("{name} (dark)")
                    } else {
                        name
                    };
                    (name, d.bytes as f64)
                })
                .collect();
            charts.push((
                "stored-datasets.svg".to_owned(),
                chart::bar_chart(
                    "Bytes stored per dataset (S3 Inventory)",
                    Unit::Bytes("bytes stored"),
                    &bars,
                )?,
            ));
        }
        let top: Vec<&DatasetUsage> = self.datasets.iter().take(self.summary.top.max(1)).collect();
        let bars: Vec<(String, f64)> = top.iter().map(|d| (label(d), d.reads as f64)).collect();
        charts.push((
            "top-datasets.svg".to_owned(),
            chart::bar_chart("Most read datasets", Unit::Count("reads"), &bars)?,
        ));
        let bars: Vec<(String, f64)> = top.iter().map(|d| (label(d), d.read_bytes as f64)).collect();
        charts.push((
            "top-datasets-bytes.svg".to_owned(),
            chart::bar_chart("Bytes read per dataset", Unit::Bytes("bytes read"), &bars)?,
        ));
        let series: Vec<Series> = self
            .daily_top()
            .into_iter()
            .map(|d| Series {
                name: label(d),
                points: self
                    .days
                    .iter()
                    .filter(|u| u.bucket == d.bucket && u.dataset == d.dataset)
                    .map(|u| (u.day, u.reads as f64))
                    .chain(day_span(&self.summary).map(|(first, _)| (first, 0.0)))
                    .collect(),
            })
            .collect();
        charts.push((
            "reads-per-day.svg".to_owned(),
            chart::line_chart("Reads per day", Unit::Count("reads"), &series)?,
        ));
        let histogram = |h: &super::AgeHistogram, unknown: u64| -> Vec<(String, f64)> {
            AGE_BUCKETS
                .iter()
                .zip(h.counts())
                .map(|((l, _, _), n)| (format!("{l} d"), n as f64))
                .chain([("unknown".to_owned(), unknown as f64)])
                .collect()
        };
        let mut all = super::AgeHistogram::default();
        let mut unknown = 0;
        for d in &self.datasets {
            for (k, n) in d.age_days.counts().iter().enumerate() {
                all.add(AGE_BUCKETS[k].1, *n);
            }
            unknown += d.reads_of_unknown_age;
        }
        charts.push((
            "ages.svg".to_owned(),
            chart::histogram(
                "Age of the data read, all datasets",
                Unit::Count("reads"),
                &histogram(&all, unknown),
            )?,
        ));
        for (i, d) in top.iter().filter(|d| d.reads > 0).enumerate() {
            charts.push((
                format!("ages-{}.svg", i + 1),
                chart::histogram(
                    &format!("Age of the data read: {}", label(d)),
                    Unit::Count("reads"),
                    &histogram(&d.age_days, d.reads_of_unknown_age),
                )?,
            ));
        }
        Ok(charts)
    }
}

/// What a section holds.
enum Body {
    Text(String),
    Table(TextTable),
    Blocks(Vec<(String, String)>),
}

fn unused_table(unused: &[UnusedDataset]) -> TextTable {
    let mut table = TextTable::new([
        "bucket",
        "dataset",
        "writes",
        "last write",
        "last read",
        "days without reads",
        "writers",
    ]);
    for u in unused {
        let writers: Vec<String> = u
            .writers
            .iter()
            .map(|w| {
                format!(
                    "{} ({} writes, last {})",
                    w.requester,
                    count(w.writes),
                    minute(w.last_write)
                )
            })
            .collect();
        table.push([
            u.bucket.clone(),
            u.dataset.clone(),
            count(u.writes),
            minute(u.last_write),
            u.last_read.map_or_else(|| "never".to_owned(), minute),
            u.days_without_reads.to_string(),
            writers.join("; "),
        ]);
    }
    table
}

fn advice_table(advice: &[Advice]) -> TextTable {
    let mut table = TextTable::new([
        "bucket",
        "dataset",
        "reads",
        "rare after",
        "stored",
        "stored from",
        "transitions",
        "saving / month",
        "one-time cost",
        "best with Intelligent-Tiering / month",
    ]);
    for a in advice {
        let steps: Vec<String> = a
            .transitions
            .iter()
            .map(|t| {
                match a
                    .chosen_archive_tier()
                    .filter(|_| t.storage_class == advisor::INTELLIGENT_TIERING)
                {
                    Some(tier) => format!(
                        "{} at {} d ({} after {} d without access)",
                        t.storage_class, t.days, tier.access_tier, tier.days
                    ),
                    None => format!("{} at {} d", t.storage_class, t.days),
                }
            })
            .collect();
        table.push([
            a.bucket.clone(),
            a.dataset.clone(),
            count(a.reads),
            a.rare_after_days.map_or_else(|| "-".to_owned(), |d| format!("{d} d")),
            bytes(a.stored_bytes),
            if a.stored_from == advisor::STORED_FROM_LOGS {
                "logs".to_owned()
            } else {
                "inventory".to_owned()
            },
            if steps.is_empty() && a.stored_bytes > 0 && a.already_moved_bytes >= a.stored_bytes {
                "none (already out of STANDARD)".to_owned()
            } else if steps.is_empty() {
                "keep in STANDARD".to_owned()
            } else {
                steps.join(", ")
            },
            if steps.is_empty() {
                "-".to_owned()
            } else {
                money(a.monthly_saving, &a.currency)
            },
            if steps.is_empty() {
                "-".to_owned()
            } else {
                money(a.one_time_transition_cost, &a.currency)
            },
            a.intelligent_tiering
                .as_ref()
                .map_or_else(|| "-".to_owned(), |it| money(it.monthly_saving, &a.currency)),
        ]);
    }
    table
}

/// Storage classes as `STANDARD 1.2 TiB, GLACIER 300 GiB`.
fn classes(by_class: &BTreeMap<String, Count>) -> String {
    by_class
        .iter()
        .map(|(class, n)| format!("{class} {}", bytes(n.bytes)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn stored_table(storage: &Storage, currency: &str) -> TextTable {
    let mut table = TextTable::new([
        "bucket",
        "dataset",
        "objects",
        "bytes",
        "classes",
        "data of",
        "requests",
        "storage / month",
    ]);
    for d in &storage.datasets {
        table.push([
            d.bucket.clone(),
            d.dataset.clone(),
            count(d.objects),
            bytes(d.bytes),
            classes(&d.by_class),
            match (d.first_day, d.last_day) {
                (Some(a), Some(b)) if a == b => a.to_string(),
                (Some(a), Some(b)) => format!("{a} .. {b}"),
                _ => "-".to_owned(),
            },
            count(d.requests),
            money(d.monthly_storage_cost, currency),
        ]);
    }
    table
}

/// A hygiene check's short name for a chart.
fn check_label(check: &str) -> &str {
    match check {
        "sigv2" => "Signature Version 2",
        "old_tls" => "TLS below 1.2",
        "anonymous" => "anonymous",
        "acl_required" => "ACL-authorised",
        "cross_region" => "cross-region",
        other => other,
    }
}

/// A requester as people call it: the role or user name of an IAM ARN, else as logged.
fn short_requester(requester: &str) -> &str {
    for marker in [":assumed-role/", ":user/", ":role/"] {
        if let Some((_, rest)) = requester.split_once(marker) {
            return rest.split('/').next().unwrap_or(rest);
        }
    }
    requester
}

fn label(d: &DatasetUsage) -> String {
    label_of(&d.bucket, &d.dataset)
}

fn label_of(bucket: &str, dataset: &str) -> String {
    format!("s3://{bucket}/{dataset}")
}

/// A delay of `minutes` in the unit that reads best: `42 min`, `17.8 h`, `29.8 days`.
fn duration(minutes: f64) -> String {
    if minutes < 120.0 {
        format!("{minutes:.0} min")
    } else if minutes < 48.0 * 60.0 {
        format!("{:.1} h", minutes / 60.0)
    } else {
        format!("{:.1} days", minutes / 1440.0)
    }
}

/// `1 day`, `2 days`.
fn plural(n: u64, unit: &str) -> String {
    if n == 1 {
        format!("1 {unit}")
    } else {
        format!("{} {unit}s", count(n))
    }
}

fn day(t: Option<DateTime<Utc>>) -> String {
    t.map_or_else(|| "-".to_owned(), |t| t.date_naive().to_string())
}

fn minute(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M").to_string()
}

/// `name` with anything but letters, digits, `.`, `-` and `_` replaced, for a file name.
/// The `(dataset label, pretty JSON)` of what `value` gives for each piece of advice that has it.
fn json_blocks(advice: &[Advice], value: impl Fn(&Advice) -> Option<&Value>) -> Vec<(String, String)> {
    advice
        .iter()
        .filter_map(|a| {
            let text = serde_json::to_string_pretty(value(a)?).ok()?;
            Some((label_of(&a.bucket, &a.dataset), text))
        })
        .collect()
}

/// Writes `value` as pretty JSON into the file `name` of `dir`.
fn write_json(dir: &ReportDir, name: &str, value: &Value) -> Result<(), ReportError> {
    let text = serde_json::to_string_pretty(value).map_err(|e| ReportError::InvalidArgument {
        argument: "--out".to_owned(),
        value: name.to_owned(),
        reason: e.to_string(),
    })?;
    dir.write(name, &text)?;
    Ok(())
}

fn file_safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || ".-_".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The most objects the object-level table shows (the JSON report and the manifests hold all).
const OBJECTS_SHOWN: usize = 25;

/// The object-level sections: per bucket what went unread, and the objects that save the most.
fn object_sections(objects: &super::ObjectActions) -> Vec<(String, Body)> {
    let w = &objects.window;
    let mut intro = format!(
        "The logs read go from {} to {} ({}). An object is unread when they show no read of it in \
         its last {} and it is at least that old",
        w.first_day,
        w.last_day,
        plural(u64::from(w.days), "day"),
        plural(u64::from(objects.unread_days_applied), "day"),
    );
    if objects.unread_days_applied < objects.unread_days {
        let _ = write!(
            intro,
            " (the logs are shorter than the {} of --unread-days)",
            plural(u64::from(objects.unread_days), "day")
        );
    }
    let _ = write!(
        intro,
        ". Savings are over {} months, net of retrieval, request, transition, minimum-duration and \
         monitoring charges.",
        objects.horizon_months
    );
    for b in &objects.buckets {
        let _ = write!(
            intro,
            "\n\n{}: {} objects listed; unread: {} objects ({}) written before the logs begin (their \
             earlier reads are unknown) and {} ({}) written since; {} to act on, saving {}.",
            b.bucket,
            count(b.objects),
            count(b.unread_before_window.0),
            bytes(b.unread_before_window.1),
            count(b.unread_inside_window.0),
            bytes(b.unread_inside_window.1),
            count(b.actions.len() as u64),
            money(b.net_saving, &objects.currency),
        );
        for rule in &b.lifecycle_rules {
            let _ = write!(intro, "\nA lifecycle rule does the same for a whole prefix: {rule}");
        }
    }
    let mut table = TextTable::new([
        "bucket",
        "key",
        "class",
        "size",
        "written",
        "last read",
        "reads 30/90/365 d",
        "readers",
        "action",
        "net saving",
    ]);
    let mut all: Vec<_> = objects.buckets.iter().flat_map(|b| &b.actions).collect();
    all.sort_by(|a, b| b.costs.net_saving.total_cmp(&a.costs.net_saving));
    for a in all.into_iter().take(OBJECTS_SHOWN) {
        table.push([
            a.bucket.clone(),
            a.key.clone(),
            a.class.clone(),
            bytes(a.bytes),
            match (a.last_modified, a.written_before_window) {
                (Some(t), true) => format!("{} (before the logs)", t.date_naive()),
                (Some(t), false) => t.date_naive().to_string(),
                (None, _) => "unknown".to_owned(),
            },
            day(a.last_read),
            format!("{}/{}/{}", a.reads_30, a.reads_90, a.reads_365),
            count(a.readers),
            match a.costs.to_class {
                Some(class) => format!("{} to {class}", a.costs.action),
                None => a.costs.action.to_owned(),
            },
            money(a.costs.net_saving, &objects.currency),
        ]);
    }
    vec![
        ("Unread objects (S3 Inventory)".to_owned(), Body::Text(intro)),
        (
            format!("Objects to move or expire, most saved first (at most {OBJECTS_SHOWN}; all in the JSON report)"),
            Body::Table(table),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_for_people() {
        assert_eq!(duration(42.4), "42 min");
        assert_eq!(duration(1065.0), "17.8 h");
        assert_eq!(duration(42875.0), "29.8 days");
        assert_eq!(plural(1, "day"), "1 day");
        assert_eq!(plural(1500, "day"), "1,500 days");
        assert_eq!(file_safe("my.bucket/../x"), "my.bucket_.._x");
        assert_eq!(
            short_requester("arn:aws:sts::123456789012:assumed-role/etl/session"),
            "etl"
        );
        assert_eq!(short_requester("arn:aws:iam::123456789012:user/ana"), "ana");
        assert_eq!(short_requester("svc:s3.amazonaws.com"), "svc:s3.amazonaws.com");
    }
}
