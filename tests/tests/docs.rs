//! The documentation agrees with what it documents. Fails, naming the file, the item and the fix,
//! when:
//!
//! - docs/deploy.md's parameter table does not list exactly the `Parameters` of template.yaml, or
//!   a row of it or of README.md's short table gives a parameter the template lacks or a default
//!   that is not the template's (an empty default is written as a word in parentheses, such as
//!   `(none)`);
//! - docs/cli.md's command table names a `lakelog` subcommand (or a subcommand of one, such as
//!   `report access`) that crates/lakelog's clap definitions do not declare, or leaves one out;
//! - docs/deploy.md's table of the functions' variables does not list exactly the variables that
//!   template.yaml sets for the functions (`Environment: Variables:`), each with the functions
//!   that get it;
//! - build/lambda/Makefile does not build exactly the template's functions, or what it builds
//!   together links DataFusion (only the reports use it), or the API function links Delta Lake,
//!   Arrow or Parquet (its zip, documented under 5 MB, stays small without them).
//! - docs/tables.md's column tables do not give exactly the columns of the tables' Arrow schemas,
//!   each with its type and whether it may be null;
//! - docs/client-api.md leaves out a status the API answers (the status table of
//!   crates/game-api/src/respond.rs) or one API Gateway answers itself;
//! - docs/cost.md's tables are not what `scripts/cost --markdown` prints.

use std::collections::{BTreeMap, BTreeSet};

use regex::Regex;
use serde_norway::Value;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

fn read(path: &str) -> String {
    std::fs::read_to_string(format!("{ROOT}/{path}")).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn template() -> Value {
    serde_norway::from_str(&read("template.yaml")).expect("template.yaml is not YAML")
}

/// The cells of a Markdown table row (`\|` is a `|` inside a cell); none for other lines.
fn cells(line: &str) -> Vec<String> {
    if !line.starts_with('|') {
        return Vec::new();
    }
    let line = line.replace("\\|", "\u{0}");
    let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
    inner
        .split('|')
        .map(|c| c.replace('\u{0}', "|").trim().to_owned())
        .collect()
}

/// The rows of the first table of `path` whose header's first cell is `first`.
fn table(path: &str, first: &str) -> Vec<Vec<String>> {
    let doc = read(path);
    let mut lines = doc
        .lines()
        .skip_while(|l| cells(l).first().map(String::as_str) != Some(first));
    assert!(
        lines.next().is_some(),
        "{path}: no table whose first column is `{first}`"
    );
    lines.skip(1).take_while(|l| l.starts_with('|')).map(cells).collect()
}

fn unquote(cell: &str) -> String {
    cell.trim_matches('`').to_owned()
}

fn check(problems: Vec<String>) {
    assert!(
        problems.is_empty(),
        "the docs disagree with the code:\n{}",
        problems.join("\n")
    );
}

/// Each parameter of template.yaml with its default ("" when it has none).
fn parameters() -> BTreeMap<String, String> {
    let template = template();
    let parameters = template.get("Parameters").and_then(Value::as_mapping);
    let parameters = parameters.expect("template.yaml: no Parameters");
    let text = |v: Option<&Value>| match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::Bool(b)) => b.to_string(),
        _ => String::new(),
    };
    parameters
        .iter()
        .map(|(name, p)| (name.as_str().unwrap().to_owned(), text(p.get("Default"))))
        .collect()
}

/// What is wrong with the rows of `path`'s parameter table, and which template parameters it lacks.
fn parameter_problems(path: &str, template: &BTreeMap<String, String>) -> (Vec<String>, BTreeSet<String>) {
    let mut problems = Vec::new();
    let mut listed = BTreeSet::new();
    for row in table(path, "parameter") {
        let (name, documented) = (unquote(&row[0]), row.get(1).cloned().unwrap_or_default());
        let Some(default) = template.get(&name) else {
            problems.push(format!(
                "{path}: parameter `{name}` is not in template.yaml: remove its row"
            ));
            continue;
        };
        let agrees = if default.is_empty() {
            documented.starts_with('(') && documented.ends_with(')')
        } else {
            documented == format!("`{default}`")
        };
        if !agrees {
            let want = if default.is_empty() {
                String::from("a word in parentheses such as `(none)`")
            } else {
                format!("`{default}`")
            };
            problems.push(format!(
                "{path}: the default of `{name}` is {documented}, template.yaml's is {want}: fix the row"
            ));
        }
        listed.insert(name);
    }
    let missing = template.keys().filter(|p| !listed.contains(*p)).cloned().collect();
    (problems, missing)
}

#[test]
fn parameter_tables_list_the_template_parameters_with_their_defaults() {
    let template = parameters();
    let (mut problems, missing) = parameter_problems("docs/deploy.md", &template);
    for name in missing {
        problems.push(format!(
            "docs/deploy.md: template.yaml's parameter `{name}` is missing from the parameter table: add a row \
             with its default and meaning"
        ));
    }
    problems.extend(parameter_problems("README.md", &template).0);
    check(problems);
}

/// The variants of the clap `enum name` in `code`, as clap names them (kebab case), with their
/// Rust names; `None` when `code` has no such enum.
fn subcommands(code: &str, name: &str) -> Option<Vec<(String, String)>> {
    let body = code.split_once(&format!("pub enum {name} {{"))?.1.split("\n}").next()?;
    let renamed = body
        .lines()
        .any(|l| l.trim_start().starts_with("#[") && l.contains("name"));
    assert!(
        !renamed,
        "enum {name}: a subcommand renamed in an attribute: teach docs.rs to read it"
    );
    let variants = body.lines().filter_map(|line| {
        let variant = line
            .strip_prefix("    ")
            .filter(|v| v.starts_with(|c: char| c.is_ascii_uppercase()))?;
        let variant: String = variant.chars().take_while(char::is_ascii_alphanumeric).collect();
        let mut kebab = String::new();
        for c in variant.chars() {
            if c.is_ascii_uppercase() && !kebab.is_empty() {
                kebab.push('-');
            }
            kebab.push(c.to_ascii_lowercase());
        }
        Some((variant, kebab))
    });
    Some(variants.collect())
}

#[test]
fn the_command_table_lists_every_lakelog_subcommand() {
    // The clap definitions: cli.rs and the commands' own argument types.
    let code: String = std::fs::read_dir(format!("{ROOT}/crates/lakelog/src/commands"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .chain([read("crates/lakelog/src/cli.rs")])
        .collect();
    let top = subcommands(&code, "Command").expect("crates/lakelog/src/cli.rs: no `pub enum Command`");
    let mut real: BTreeMap<String, Option<BTreeSet<String>>> = BTreeMap::new();
    for (variant, name) in &top {
        let nested = subcommands(&code, &format!("{variant}Command"));
        real.insert(
            name.clone(),
            nested.map(|n| n.into_iter().map(|(_, kebab)| kebab).collect()),
        );
    }
    // Every clap `Subcommand` enum is `Command` or the `<Variant>Command` of one of its variants.
    let declared = Regex::new(r"derive\([^)]*\bSubcommand\b[^)]*\)\]\s*(?:#\[[^\]]*\]\s*)*pub enum (\w+)").unwrap();
    for enum_name in declared.captures_iter(&code).map(|c| c[1].to_owned()) {
        let known = enum_name == "Command" || top.iter().any(|(v, _)| enum_name == format!("{v}Command"));
        assert!(
            known,
            "clap enum {enum_name}: not reached from `Command`: teach docs.rs where it is"
        );
    }

    let named = Regex::new(r"`lakelog ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?").unwrap();
    let mut documented: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for row in table("docs/cli.md", "command") {
        for c in named.captures_iter(&row[0]) {
            let nested = documented.entry(c[1].to_owned()).or_default();
            nested.extend(c.get(2).map(|m| m.as_str().to_owned()));
        }
    }

    let mut problems = Vec::new();
    for (command, nested) in &documented {
        match real.get(command) {
            None => problems.push(format!(
                "docs/cli.md: `lakelog {command}` is not a subcommand (crates/lakelog/src/cli.rs): remove or rename it"
            )),
            Some(Some(real_nested)) => {
                for sub in nested.difference(real_nested) {
                    problems.push(format!(
                        "docs/cli.md: `lakelog {command} {sub}` does not exist: remove or rename"
                    ));
                }
            }
            Some(None) => {}
        }
    }
    for (command, nested) in &real {
        let Some(doc_nested) = documented.get(command) else {
            problems.push(format!(
                "docs/cli.md: `lakelog {command}` is missing from the command table: add a row"
            ));
            continue;
        };
        for sub in nested.iter().flatten().filter(|s| !doc_nested.contains(*s)) {
            problems.push(format!(
                "docs/cli.md: `lakelog {command} {sub}` is missing from the command table: add it"
            ));
        }
    }
    check(problems);
}

/// Each variable template.yaml sets for the functions, with the functions (by crate; `all` for
/// the `Globals`) that get it.
/// Each function's crate, from the Makefile that builds them: the crate whose `bootstrap` its
/// `build-<LogicalId>` target copies.
fn function_crates() -> BTreeMap<String, String> {
    let makefile = read("build/lambda/Makefile");
    let target = Regex::new(r"(?m)^build-(\w+): lambdas\n\tcp \$\(LAMBDA_DIR\)/([\w-]+)/bootstrap ").unwrap();
    target
        .captures_iter(&makefile)
        .map(|c| (c[1].to_owned(), c[2].to_owned()))
        .collect()
}

/// The crates build/lambda/Makefile builds, in its one `cargo lambda build`.
fn built_crates() -> BTreeSet<String> {
    let makefile = read("build/lambda/Makefile");
    Regex::new(r"(?m)^FUNCTIONS := (.*)$")
        .unwrap()
        .captures(&makefile)
        .expect("build/lambda/Makefile: no FUNCTIONS line")[1]
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// The packages (`name vX.Y.Z`) that `cargo tree` finds in the normal dependencies of `crates`
/// built together, with the features that build unifies.
fn linked_packages(crates: &BTreeSet<String>) -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut command = std::process::Command::new(cargo);
    command.current_dir(ROOT).args([
        "tree", "--locked", "--edges", "normal", "--prefix", "none", "--format", "{p}",
    ]);
    for name in crates {
        command.args(["--package", name]);
    }
    let out = command.output().expect("cannot run cargo tree");
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            Some(format!("{} {}", words.next()?, words.next()?))
        })
        .collect()
}

#[test]
fn the_functions_link_no_datafusion_and_the_api_no_delta_lake() {
    let named = |packages: &BTreeSet<String>, prefixes: &[&str]| -> Vec<String> {
        packages
            .iter()
            .filter(|p| prefixes.iter().any(|prefix| p.starts_with(prefix)))
            .cloned()
            .collect()
    };
    let built = built_crates();
    let together = linked_packages(&built);
    assert_eq!(
        named(&together, &["deltalake-core "]).len(),
        1,
        "cargo tree found no single deltalake-core in the writers: the check would read nothing"
    );
    let mut problems = Vec::new();
    let datafusion = named(&together, &["datafusion"]);
    if !datafusion.is_empty() {
        problems.push(format!(
            "the functions build/lambda/Makefile builds together link {datafusion:?}: only the reports need DataFusion"
        ));
    }
    let api = linked_packages(&BTreeSet::from(["game-api-lambda".to_owned()]));
    assert!(
        !named(&api, &["lambda_runtime "]).is_empty(),
        "cargo tree found no lambda_runtime in game-api-lambda: the check would read nothing"
    );
    let lake = named(&api, &["deltalake", "arrow", "parquet", "datafusion"]);
    if !lake.is_empty() {
        problems.push(format!(
            "game-api-lambda links {lake:?}: the API only validates and stamps events (its zip stays under 5 MB)"
        ));
    }
    check(problems);
}

fn function_variables() -> BTreeMap<String, BTreeSet<String>> {
    let template = template();
    let variables = |f: &Value| {
        let vars = f
            .get("Environment")
            .and_then(|e| e.get("Variables"))
            .and_then(Value::as_mapping);
        vars.into_iter()
            .flat_map(|m| m.keys())
            .map(|k| k.as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let globals = template.get("Globals").and_then(|g| g.get("Function"));
    for name in globals.map(variables).unwrap_or_default() {
        out.entry(name).or_default().insert("all".into());
    }
    let resources = template
        .get("Resources")
        .and_then(Value::as_mapping)
        .expect("template.yaml: no Resources");
    let crates = function_crates();
    for (logical_id, resource) in resources {
        if resource.get("Type").and_then(Value::as_str) != Some("AWS::Serverless::Function") {
            continue;
        }
        let logical_id = logical_id.as_str().expect("a resource name that is not a string");
        let function = crates.get(logical_id).unwrap_or_else(|| {
            panic!("build/lambda/Makefile has no build-{logical_id} target copying a crate's bootstrap")
        });
        let properties = resource.get("Properties").expect("a function without Properties");
        for name in variables(properties) {
            out.entry(name).or_default().insert(function.clone());
        }
    }
    out
}

#[test]
fn the_functions_variables_are_documented() {
    let template = function_variables();
    let mut problems = Vec::new();
    let mut documented = BTreeSet::new();
    for row in table("docs/deploy.md", "variable") {
        let name = unquote(&row[0]);
        let functions: BTreeSet<String> = row[1].split(',').map(|f| f.trim().to_owned()).collect();
        match template.get(&name) {
            None => problems.push(format!(
                "docs/deploy.md: `{name}` is in the functions' variable table, but template.yaml sets it for no \
                 function: remove its row (or say elsewhere what reads it)"
            )),
            Some(real) if *real != functions => problems.push(format!(
                "docs/deploy.md: `{name}` is set for {} in template.yaml, the table says {}: fix its function column",
                real.iter().cloned().collect::<Vec<_>>().join(", "),
                row[1]
            )),
            Some(_) => {}
        }
        documented.insert(name);
    }
    for name in template.keys().filter(|n| !documented.contains(*n)) {
        problems.push(format!(
            "docs/deploy.md: template.yaml sets `{name}` for a function, and the functions' variable table lacks it: \
             add a row saying what it does and its default"
        ));
    }
    check(problems);
}

#[test]
fn the_makefile_builds_every_function_of_the_template_and_nothing_else() {
    let template = template();
    let functions: BTreeSet<String> = template
        .get("Resources")
        .and_then(Value::as_mapping)
        .expect("template.yaml: no Resources")
        .iter()
        .filter(|(_, r)| r.get("Type").and_then(Value::as_str) == Some("AWS::Serverless::Function"))
        .map(|(name, _)| name.as_str().unwrap().to_owned())
        .collect();
    let crates = function_crates();
    let built = built_crates();
    let mut problems = Vec::new();
    if crates.keys().cloned().collect::<BTreeSet<_>>() != functions {
        problems.push(format!(
            "build/lambda/Makefile has build targets for {:?}, template.yaml's functions are {functions:?}",
            crates.keys().collect::<Vec<_>>()
        ));
    }
    if crates.values().cloned().collect::<BTreeSet<_>>() != built {
        problems.push(format!(
            "build/lambda/Makefile builds the crates {built:?} and copies {:?}: they must be the same",
            crates.values().collect::<Vec<_>>()
        ));
    }
    check(problems);
}

/// A column type in the words of Athena and Spark SQL.
fn sql_type(data_type: &arrow::datatypes::DataType) -> String {
    use arrow::datatypes::DataType as T;
    match data_type {
        T::Utf8 | T::LargeUtf8 | T::Utf8View => "string".into(),
        T::Int64 => "bigint".into(),
        T::Int32 => "int".into(),
        T::Int16 => "smallint".into(),
        T::Float64 => "double".into(),
        T::Float32 => "float".into(),
        T::Boolean => "boolean".into(),
        T::Date32 => "date".into(),
        T::Timestamp(_, Some(_)) => "timestamp (UTC)".into(),
        T::Timestamp(_, None) => "timestamp_ntz".into(),
        T::Binary | T::LargeBinary => "binary".into(),
        T::Struct(_) => "struct".into(),
        T::List(item) | T::LargeList(item) => format!("array<{}>", sql_type(item.data_type())),
        T::Map(entries, _) => match entries.data_type() {
            T::Struct(kv) if kv.len() == 2 => {
                format!("map<{}, {}>", sql_type(kv[0].data_type()), sql_type(kv[1].data_type()))
            }
            other => format!("{other}"),
        },
        other => format!("{other}"),
    }
}

/// The rows of a column table for `schema`: each column (a struct's fields as `column.field`), its
/// type and whether it may be null.
fn column_rows(schema: &arrow::datatypes::Schema) -> Vec<[String; 3]> {
    fn add(prefix: &str, field: &arrow::datatypes::Field, rows: &mut Vec<[String; 3]>) {
        let name = format!("{prefix}{}", field.name());
        rows.push([
            format!("`{name}`"),
            sql_type(field.data_type()),
            if field.is_nullable() { "yes" } else { "no" }.to_owned(),
        ]);
        if let arrow::datatypes::DataType::Struct(children) = field.data_type() {
            for child in children {
                add(&format!("{name}."), child, rows);
            }
        }
    }
    let mut rows = Vec::new();
    for field in schema.fields() {
        add("", field, &mut rows);
    }
    rows
}

#[test]
fn the_column_tables_give_every_column_with_its_type() {
    let tables = [
        ("access_logs column", s3_access_log::access_logs_schema()),
        ("access-log rejects column", s3_access_log::rejects_schema()),
        ("game_events column", game_events::batch::game_events_schema()),
        (
            "game_events_rejects column",
            game_events::batch::game_events_rejects_schema(),
        ),
    ];
    let mut problems = Vec::new();
    for (header, schema) in tables {
        let want = column_rows(&schema);
        let got: Vec<[String; 3]> = table("docs/tables.md", header)
            .into_iter()
            .map(|row| [0, 1, 2].map(|i| row.get(i).cloned().unwrap_or_default()))
            .collect();
        if got != want {
            let rows: Vec<String> = want
                .iter()
                .map(|[name, ty, null]| format!("| {name} | {ty} | {null} |"))
                .collect();
            problems.push(format!(
                "docs/tables.md: the `{header}` table does not give the table's columns; they are:\n| {header} | type | null |\n|---|---|---|\n{}",
                rows.join("\n")
            ));
        }
    }
    check(problems);
}

/// The statuses of a Markdown table's first column in `text` (lines `| 200 | ...`, or `//! | 200 |`
/// in a module's documentation; `502, 504` gives both).
fn statuses(text: &str) -> BTreeSet<u16> {
    text.lines()
        .map(|l| l.trim_start_matches("//!").trim())
        .filter_map(|l| cells(l).into_iter().next())
        .flat_map(|cell| {
            cell.split([',', '/'])
                .filter_map(|s| s.trim().parse::<u16>().ok())
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn the_client_contract_gives_every_status_the_api_answers() {
    let code = statuses(&read("crates/game-api/src/respond.rs"));
    let documented = statuses(&read("docs/client-api.md"));
    assert!(
        code.len() >= 8,
        "the status table of respond.rs was not found: {code:?}"
    );
    let missing: Vec<String> = code
        .difference(&documented)
        .map(|s| {
            format!(
                "docs/client-api.md: status {s}, which the API answers (crates/game-api/src/respond.rs), is missing"
            )
        })
        .collect();
    // API Gateway's own answers, before or instead of the function's.
    let gateway: Vec<String> = [403, 429, 502, 504]
        .into_iter()
        .filter(|s| !documented.contains(s))
        .map(|s| format!("docs/client-api.md: status {s}, which API Gateway answers itself, is missing"))
        .collect();
    check(missing.into_iter().chain(gateway).collect());
}

#[test]
fn the_cost_tables_are_what_the_model_computes() {
    let out = std::process::Command::new(lakelog_tests::python())
        .arg(format!("{ROOT}/scripts/cost"))
        .arg("--markdown")
        .output()
        .expect("cannot run scripts/cost");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let computed = String::from_utf8(out.stdout).unwrap();
    let doc = read("docs/cost.md");
    let block = doc
        .split_once("<!-- scripts/cost --markdown -->\n")
        .and_then(|(_, rest)| rest.split_once("\n<!-- end -->"))
        .map(|(block, _)| block)
        .expect("docs/cost.md: no block between <!-- scripts/cost --markdown --> and <!-- end -->");
    assert_eq!(
        block.trim(),
        computed.trim(),
        "docs/cost.md: the tables are not what scripts/cost --markdown prints now: paste its output"
    );
}
