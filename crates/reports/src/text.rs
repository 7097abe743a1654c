//! What a report prints on standard output: plain-text tables for terminals, or JSON.

/// How a report is printed on standard output.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Format {
    /// Aligned plain-text tables.
    #[default]
    Table,
    /// One JSON document.
    Json,
}

/// A table of text cells with a header row, printed with aligned columns. Columns whose cells are
/// all numbers are right-aligned. Control characters in cells (a key may contain a newline) are
/// shown escaped, so every row stays on one line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TextTable {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl TextTable {
    /// A table with these column headers.
    pub fn new<S: Into<String>>(headers: impl IntoIterator<Item = S>) -> Self {
        Self {
            headers: headers.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row; missing cells are empty, cells beyond the headers are dropped.
    pub fn push<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        let mut row: Vec<String> = cells.into_iter().map(Into::into).take(self.headers.len()).collect();
        row.resize(self.headers.len(), String::new());
        self.rows.push(row);
    }

    /// The column headers.
    pub fn headers(&self) -> &[String] {
        &self.headers
    }

    /// The rows, as pushed.
    pub fn rows(&self) -> &[Vec<String>] {
        &self.rows
    }

    /// Whether no row was pushed.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Whether column `i` is numeric (right-aligned): every non-empty cell is a number, possibly
    /// with thousands separators, a sign, a currency sign or a unit after it.
    pub fn is_numeric(&self, i: usize) -> bool {
        let mut any = false;
        for row in &self.rows {
            let cell = row[i].trim();
            if cell.is_empty() || cell == "-" {
                continue;
            }
            any = true;
            if !looks_numeric(cell) {
                return false;
            }
        }
        any
    }

    /// The table as lines of text, each ending with `\n`.
    pub fn render(&self) -> String {
        let cells = |row: &[String]| row.iter().map(|c| printable(c)).collect::<Vec<String>>();
        let header = cells(&self.headers);
        let body: Vec<Vec<String>> = self.rows.iter().map(|r| cells(r)).collect();
        let widths: Vec<usize> = (0..header.len())
            .map(|i| {
                body.iter()
                    .map(|r| r[i].chars().count())
                    .chain([header[i].chars().count()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let numeric: Vec<bool> = (0..header.len()).map(|i| self.is_numeric(i)).collect();
        let line = |row: &[String]| {
            let mut out = String::new();
            for (i, cell) in row.iter().enumerate() {
                let pad = widths[i] - cell.chars().count();
                if i > 0 {
                    out.push_str("  ");
                }
                if numeric[i] {
                    out.extend(std::iter::repeat_n(' ', pad));
                    out.push_str(cell);
                } else {
                    out.push_str(cell);
                    out.extend(std::iter::repeat_n(' ', pad));
                }
            }
            let mut out = out.trim_end().to_owned();
            out.push('\n');
            out
        };
        let mut out = line(&header);
        let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
        out.push_str(&line(&rule));
        for row in &body {
            out.push_str(&line(row));
        }
        out
    }
}

fn looks_numeric(cell: &str) -> bool {
    let core = cell
        .trim_start_matches(['-', '+', '$', '~'])
        .trim_end_matches(|c: char| c.is_alphabetic() || c == '%' || c == ' ');
    !core.is_empty()
        && core.starts_with(|c: char| c.is_ascii_digit())
        && core.chars().all(|c| c.is_ascii_digit() || c == ',' || c == '.')
}

/// `text` with control characters escaped (`\n`, `\t`, `\u{1b}`...).
fn printable(text: &str) -> String {
    if !text.chars().any(char::is_control) {
        return text.to_owned();
    }
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// A row's label, marked ` *` when its figures are provisional.
pub(crate) fn marked(label: String, provisional: bool) -> String {
    if provisional { label + " *" } else { label }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligns_text_left_and_numbers_right() {
        let mut table = TextTable::new(["dataset", "reads", "saving"]);
        table.push(["events/clicks/", "1,234", "$12.50"]);
        table.push(["café/", "7", "-"]);
        table.push(["x"]);
        assert_eq!(
            table.render(),
            "dataset         reads  saving\n\
             --------------  -----  ------\n\
             events/clicks/  1,234  $12.50\n\
             café/               7       -\n\
             x\n"
        );
    }

    #[test]
    fn control_characters_cannot_break_lines() {
        let mut table = TextTable::new(["key"]);
        table.push(["a\nb\u{1b}[31m"]);
        let text = table.render();
        assert_eq!(text.lines().count(), 3, "{text}");
        assert!(text.contains("a\\nb\\u{1b}[31m"), "{text}");
    }

    #[test]
    fn numeric_columns() {
        let mut table = TextTable::new(["a", "b", "c"]);
        table.push(["1.5 GB", "12%", "v2"]);
        table.push(["-", "", "3"]);
        assert!(table.is_numeric(0));
        assert!(table.is_numeric(1));
        assert!(!table.is_numeric(2));
        assert!(!TextTable::new(["empty"]).is_numeric(0));
    }
}
