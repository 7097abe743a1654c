//! The HTML page of a report, and the directory its files go to.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use crate::chart::Svg;
use crate::error::ReportError;
use crate::text::TextTable;

/// A self-contained HTML page: headings, paragraphs, tables, preformatted blocks and inline SVG
/// charts. All text is escaped; only [`Svg`] charts (drawn by [`super::chart`], which escapes
/// their labels) go in as markup.
#[derive(Debug, Clone)]
pub(crate) struct HtmlPage {
    title: String,
    body: String,
}

impl HtmlPage {
    /// An empty page with this title (also its first heading).
    pub(crate) fn new(title: &str) -> Self {
        let mut page = Self {
            title: title.to_owned(),
            body: String::new(),
        };
        let _ = writeln!(page.body, "<h1>{}</h1>", escape_html(title));
        page
    }

    /// A piece of a page (no title, no heading) whose markup goes into another: see
    /// [`HtmlPage::markup`].
    pub(crate) fn fragment() -> Self {
        Self {
            title: String::new(),
            body: String::new(),
        }
    }

    /// The markup of the body so far (for a [`HtmlPage::fragment`] sent to a live page).
    pub(crate) fn markup(&self) -> &str {
        &self.body
    }

    /// An empty block with this id (letters, digits and `-`), for a script to fill.
    pub(crate) fn region(&mut self, id: &str) -> &mut Self {
        let id: String = id.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
        let _ = writeln!(self.body, "<div id=\"{id}\" aria-live=\"polite\"></div>");
        self
    }

    /// A script: only code of this program (a `'static` text), never input.
    pub(crate) fn script(&mut self, code: &'static str) -> &mut Self {
        let _ = writeln!(self.body, "<script>\n{code}\n</script>");
        self
    }

    /// A section heading.
    pub(crate) fn heading(&mut self, text: &str) -> &mut Self {
        let _ = writeln!(self.body, "<h2>{}</h2>", escape_html(text));
        self
    }

    /// A paragraph of text.
    pub(crate) fn paragraph(&mut self, text: &str) -> &mut Self {
        let _ = writeln!(self.body, "<p>{}</p>", escape_html(text));
        self
    }

    /// The figures a report opens with, side by side: `(what, value)` each.
    pub(crate) fn headline(&mut self, figures: &[(&str, String)]) -> &mut Self {
        self.body.push_str("<dl class=\"headline\">\n");
        for (what, value) in figures {
            let _ = writeln!(
                self.body,
                "<div><dt>{}</dt><dd>{}</dd></div>",
                escape_html(what),
                escape_html(value)
            );
        }
        self.body.push_str("</dl>\n");
        self
    }

    /// A table; numeric columns are right-aligned. A long table is folded: a summary line with its
    /// size opens it.
    pub(crate) fn table(&mut self, table: &TextTable) -> &mut Self {
        let folded = table.rows().len() > OPEN_ROWS;
        if folded {
            let _ = writeln!(
                self.body,
                "<details>\n<summary>{} rows (show)</summary>",
                table.rows().len()
            );
        }
        self.open_table(table);
        if folded {
            self.body.push_str("</details>\n");
        }
        self
    }

    fn open_table(&mut self, table: &TextTable) {
        let numeric: Vec<bool> = (0..table.headers().len()).map(|i| table.is_numeric(i)).collect();
        let class = |i: usize| if numeric[i] { " class=\"num\"" } else { "" };
        self.body.push_str("<table>\n<thead><tr>");
        for (i, header) in table.headers().iter().enumerate() {
            let _ = write!(self.body, "<th{}>{}</th>", class(i), escape_html(header));
        }
        self.body.push_str("</tr></thead>\n<tbody>\n");
        for row in table.rows() {
            self.body.push_str("<tr>");
            for (i, cell) in row.iter().enumerate() {
                let _ = write!(self.body, "<td{}>{}</td>", class(i), escape_html(cell));
            }
            self.body.push_str("</tr>\n");
        }
        self.body.push_str("</tbody>\n</table>\n");
    }

    /// A block of preformatted text (JSON, commands).
    pub(crate) fn preformatted(&mut self, text: &str) -> &mut Self {
        let _ = writeln!(self.body, "<pre>{}</pre>", escape_html(text));
        self
    }

    /// A chart, inline; its title is drawn in the chart.
    pub(crate) fn chart(&mut self, svg: &Svg) -> &mut Self {
        // The chart draws its title itself (its SVG file stands on its own too); the figure only
        // names it for screen readers.
        let _ = writeln!(
            self.body,
            "<figure aria-label=\"{}\">\n{}\n</figure>",
            escape_html(svg.title()),
            svg.markup()
        );
        self
    }

    /// The complete document.
    pub(crate) fn finish(&self) -> String {
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
             <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n{}</body>\n</html>\n",
            escape_html(&self.title),
            self.body
        )
    }
}

/// Tables up to this many rows are shown open; longer ones are folded.
pub(crate) const OPEN_ROWS: usize = 15;

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em auto;max-width:72em;padding:0 1em;color:#222}\
table{border-collapse:collapse;margin:1em 0;font-size:.9em}th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left}\
th{background:#f3f3f3}.num{text-align:right;font-variant-numeric:tabular-nums}\
pre{background:#f6f6f6;padding:1em;overflow:auto}figure{margin:1em 0}svg{max-width:100%;height:auto}\
.headline{display:flex;flex-wrap:wrap;gap:.75em;margin:1em 0 2em}.headline div{border:1px solid #ddd;border-radius:6px;\
padding:.6em 1em;min-width:10em;background:#fafafa}.headline dt{font-size:.85em;color:#555}\
.headline dd{margin:.2em 0 0;font-size:1.5em;font-weight:600;font-variant-numeric:tabular-nums}\
details{margin:1em 0}summary{cursor:pointer;color:#0072b2}";

/// `text` with `&`, `<`, `>`, `"` and `'` escaped, for HTML text and attribute values.
pub(crate) fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The directory a report is written to (`--out DIR`), created when missing.
#[derive(Debug, Clone)]
pub struct ReportDir {
    path: PathBuf,
}

impl ReportDir {
    /// Creates `path` (and its parents) if needed.
    pub fn create(path: &Path) -> Result<Self, ReportError> {
        fs::create_dir_all(path).map_err(|source| ReportError::Write {
            path: path.to_owned(),
            source,
        })?;
        Ok(Self { path: path.to_owned() })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `contents` to the file `name` in the directory and returns its path. `name` must be
    /// a plain file name.
    pub fn write(&self, name: &str, contents: &str) -> Result<PathBuf, ReportError> {
        let path = self.path.join(name);
        if name.is_empty() || name.contains(['/', '\\']) || name == "." || name == ".." {
            return Err(ReportError::Write {
                path,
                source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a plain file name"),
            });
        }
        fs::write(&path, contents).map_err(|source| ReportError::Write {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    }

    /// Writes the chart as `name` (an `.svg` file) and returns its path.
    pub fn write_chart(&self, name: &str, svg: &Svg) -> Result<PathBuf, ReportError> {
        self.write(name, svg.markup())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chart;

    #[test]
    fn text_is_escaped_everywhere() {
        let evil = "<img src=x onerror=alert('x')> & \"q\"";
        let mut page = HtmlPage::new(evil);
        let mut table = TextTable::new([evil, "n"]);
        table.push([evil, "12"]);
        page.heading(evil).paragraph(evil).table(&table).preformatted(evil);
        page.headline(&[(evil, evil.to_owned())]);
        let html = page.finish();
        assert!(!html.contains("<img"), "{html}");
        assert_eq!(
            html.matches("&lt;img src=x onerror=alert(&#39;x&#39;)&gt; &amp; &quot;q&quot;")
                .count(),
            9
        );
        assert!(html.contains("<td class=\"num\">12</td>"));
        assert!(html.starts_with("<!DOCTYPE html>"));
    }

    #[test]
    fn long_tables_are_folded_and_short_ones_open() {
        let mut short = TextTable::new(["n"]);
        let mut long = TextTable::new(["n"]);
        for i in 0..OPEN_ROWS {
            short.push([i.to_string()]);
            long.push([i.to_string()]);
        }
        long.push(["last".to_owned()]);
        let html = HtmlPage::new("r").table(&short).finish();
        assert!(!html.contains("<details"), "{html}");
        let html = HtmlPage::new("r").table(&long).finish();
        let summary = format!("<details>\n<summary>{} rows (show)</summary>\n<table>", OPEN_ROWS + 1);
        assert!(html.contains(&summary), "{html}");
        assert!(
            html.contains("<td>last</td>") && html.contains("</table>\n</details>"),
            "{html}"
        );
    }

    #[test]
    fn charts_are_inlined_and_files_written() {
        let svg = chart::histogram("Ages <0>", chart::Unit::Count("reads"), &[("0".into(), 1.0)]).unwrap();
        let mut page = HtmlPage::new("Report");
        page.chart(&svg);
        let html = page.finish();
        assert!(html.contains("<svg") && html.contains("<figure aria-label=\"Ages &lt;0&gt;\">"));
        // The title once in view: drawn in the chart, not repeated under it.
        assert!(!html.contains("<figcaption"));
        let dir = tempfile::tempdir().unwrap();
        let out = ReportDir::create(&dir.path().join("a/b")).unwrap();
        let path = out.write_chart("ages.svg", &svg).unwrap();
        assert_eq!(std::fs::read_to_string(path).unwrap(), svg.markup());
        assert!(out.write("../escape.html", "x").is_err());
        assert!(out.write("", "x").is_err());
    }
}
