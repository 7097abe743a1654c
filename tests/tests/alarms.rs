//! The alarms fire: each alarm of template.yaml is evaluated, with CloudWatch's metric math and
//! missing-data rules, over the metric documents the functions' own code emits for each failure
//! (a stranded link, every commit pass failing, one access-log table failing alone, on stacks of
//! both pipelines or of one; the canary's probes not landing, or the canary silent) and for a
//! healthy idle stack. Each failure must breach the alarm that
//! watches it; the idle stack must breach none. The metrics an alarm reads are looked up by the
//! namespace and dimensions the documents carry, so an alarm on a metric nobody emits reads
//! missing data and fails the failure's check.

use std::collections::BTreeMap;

use serde_norway::Value;

/// The namespace the template's `MetricsNamespace/STACK_NAME` stands for here.
const NS: &str = "lakelog-test/stack";

/// Five-minute periods a scenario lasts (every alarm here evaluates 3 of them).
const PERIODS: usize = 4;

/// What CloudWatch holds for one period: each metric's values, by (namespace, name, dimensions).
type Period = BTreeMap<(String, String, Vec<(String, String)>), Vec<f64>>;

/// The metric documents (EMF) of a scenario's period, as CloudWatch stores them.
fn store(documents: &[serde_json::Value]) -> Period {
    let mut period = Period::new();
    for doc in documents {
        for spec in doc["_aws"]["CloudWatchMetrics"].as_array().into_iter().flatten() {
            let namespace = spec["Namespace"].as_str().unwrap_or_default().to_owned();
            for set in spec["Dimensions"].as_array().into_iter().flatten() {
                let dimensions: Vec<(String, String)> = set
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|d| d.as_str())
                    .map(|d| (d.to_owned(), doc[d].as_str().unwrap_or_default().to_owned()))
                    .collect();
                for metric in spec["Metrics"].as_array().into_iter().flatten() {
                    let name = metric["Name"].as_str().unwrap_or_default().to_owned();
                    if let Some(value) = doc[name.as_str()].as_f64() {
                        let mut dims = dimensions.clone();
                        dims.sort();
                        period.entry((namespace.clone(), name, dims)).or_default().push(value);
                    }
                }
            }
        }
    }
    period
}

/// A scalar of the template: a string, or `!Ref`/`!Sub` of a parameter with its default.
fn text(value: &Value, parameters: &BTreeMap<String, String>) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Tagged(tagged) => {
            let inner = text(&tagged.value, parameters)?;
            if tagged.tag == "Ref" {
                parameters.get(&inner).cloned().or(Some(inner))
            } else if tagged.tag == "GetAtt" {
                Some(inner)
            } else if tagged.tag == "Sub" {
                let mut out = inner;
                for (name, default) in parameters {
                    out = out.replace(&format!("${{{name}}}"), default);
                }
                Some(out)
            } else {
                None
            }
        }
        _ => None,
    }
}

/// One metric's series over the scenario, with the alarm's statistic: `None` where missing.
fn series(stat: &Value, periods: &[Period], parameters: &BTreeMap<String, String>) -> Vec<Option<f64>> {
    let metric = &stat["Metric"];
    let namespace = text(&metric["Namespace"], parameters).unwrap_or_default();
    let name = text(&metric["MetricName"], parameters).unwrap_or_default();
    let mut dimensions: Vec<(String, String)> = metric["Dimensions"]
        .as_sequence()
        .into_iter()
        .flatten()
        .filter_map(|d| Some((text(&d["Name"], parameters)?, text(&d["Value"], parameters)?)))
        .collect();
    dimensions.sort();
    let statistic = text(&stat["Stat"], parameters).unwrap_or_default();
    periods
        .iter()
        .map(|period| {
            let values = period.get(&(namespace.clone(), name.clone(), dimensions.clone()))?;
            Some(match statistic.as_str() {
                "Sum" => values.iter().sum(),
                "Maximum" => values.iter().copied().fold(f64::MIN, f64::max),
                "Minimum" => values.iter().copied().fold(f64::MAX, f64::min),
                "SampleCount" => values.len() as f64,
                _ => values.iter().sum::<f64>() / values.len() as f64,
            })
        })
        .collect()
}

/// A metric-math expression over series, evaluated period by period: arithmetic on a missing
/// point is missing, `FILL(m, v)` fills a point that is missing where any series of the alarm
/// has one, `IF(c, a, b)`, comparisons, `AND`, `OR`.
struct Math<'a> {
    tokens: Vec<String>,
    at: usize,
    ids: &'a BTreeMap<String, Vec<Option<f64>>>,
    period: usize,
    /// Whether any series of the alarm has a point in this period (metric math's timestamps).
    any: bool,
}

impl Math<'_> {
    fn tokens(expression: &str) -> Vec<String> {
        let mut out = Vec::new();
        let chars: Vec<char> = expression.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if c.is_whitespace() {
                i += 1;
            } else if c.is_ascii_alphanumeric() || c == '_' || c == '.' {
                let start = i;
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == '.') {
                    i += 1;
                }
                out.push(chars[start..i].iter().collect());
            } else if i + 1 < chars.len()
                && matches!((c, chars[i + 1]), ('=', '=') | ('>', '=') | ('<', '=') | ('!', '='))
            {
                out.push(chars[i..i + 2].iter().collect());
                i += 2;
            } else {
                out.push(c.to_string());
                i += 1;
            }
        }
        out
    }

    fn peek(&self) -> &str {
        self.tokens.get(self.at).map_or("", String::as_str)
    }

    fn next(&mut self) -> String {
        self.at += 1;
        self.tokens.get(self.at - 1).cloned().unwrap_or_default()
    }

    fn or(&mut self) -> Option<f64> {
        let mut left = self.and();
        while self.peek() == "OR" {
            self.next();
            let right = self.and();
            left = left.zip(right).map(|(a, b)| f64::from(u8::from(a != 0.0 || b != 0.0)));
        }
        left
    }

    fn and(&mut self) -> Option<f64> {
        let mut left = self.compare();
        while self.peek() == "AND" {
            self.next();
            let right = self.compare();
            left = left.zip(right).map(|(a, b)| f64::from(u8::from(a != 0.0 && b != 0.0)));
        }
        left
    }

    fn compare(&mut self) -> Option<f64> {
        let left = self.sum();
        let op = self.peek().to_owned();
        if !matches!(op.as_str(), ">" | "<" | ">=" | "<=" | "==" | "!=") {
            return left;
        }
        self.next();
        let right = self.sum();
        left.zip(right).map(|(a, b)| {
            f64::from(u8::from(match op.as_str() {
                ">" => a > b,
                "<" => a < b,
                ">=" => a >= b,
                "<=" => a <= b,
                "==" => a == b,
                _ => a != b,
            }))
        })
    }

    fn sum(&mut self) -> Option<f64> {
        let mut left = self.product();
        while matches!(self.peek(), "+" | "-") {
            let op = self.next();
            let right = self.product();
            left = left.zip(right).map(|(a, b)| if op == "+" { a + b } else { a - b });
        }
        left
    }

    fn product(&mut self) -> Option<f64> {
        let mut left = self.primary();
        while matches!(self.peek(), "*" | "/") {
            let op = self.next();
            let right = self.primary();
            left = left.zip(right).and_then(|(a, b)| {
                if op == "*" {
                    Some(a * b)
                } else {
                    (b != 0.0).then(|| a / b)
                }
            });
        }
        left
    }

    fn primary(&mut self) -> Option<f64> {
        let token = self.next();
        match token.as_str() {
            "(" => {
                let value = self.or();
                assert_eq!(self.next(), ")");
                value
            }
            "IF" => {
                assert_eq!(self.next(), "(");
                let condition = self.or();
                assert_eq!(self.next(), ",");
                let then = self.or();
                assert_eq!(self.next(), ",");
                let otherwise = self.or();
                assert_eq!(self.next(), ")");
                condition.and_then(|c| if c != 0.0 { then } else { otherwise })
            }
            "FILL" => {
                assert_eq!(self.next(), "(");
                let value = self.or();
                assert_eq!(self.next(), ",");
                let fill = self.or();
                assert_eq!(self.next(), ")");
                value.or(if self.any { fill } else { None })
            }
            _ => match token.parse::<f64>() {
                Ok(number) => Some(number),
                Err(_) => {
                    let series = self.ids.get(&token).unwrap_or_else(|| panic!("unknown id {token}"));
                    series[self.period]
                }
            },
        }
    }
}

/// Whether the alarm is in ALARM at the scenario's end: its last `EvaluationPeriods` points, with
/// its `TreatMissingData`, all breach (DatapointsToAlarm defaults to EvaluationPeriods).
fn fires(alarm: &Value, periods: &[Period], parameters: &BTreeMap<String, String>) -> bool {
    let properties = &alarm["Properties"];
    let values: Vec<Option<f64>> = match properties["Metrics"].as_sequence() {
        Some(metrics) => {
            let mut ids = BTreeMap::new();
            for m in metrics {
                if !m["MetricStat"].is_null() {
                    ids.insert(
                        text(&m["Id"], parameters).unwrap_or_default(),
                        series(&m["MetricStat"], periods, parameters),
                    );
                }
            }
            let result = metrics
                .iter()
                .find(|m| !m["Expression"].is_null() && m["ReturnData"].as_bool() != Some(false))
                .expect("an expression whose data the alarm reads");
            let expression = text(&result["Expression"], parameters).expect("an expression");
            (0..periods.len())
                .map(|period| {
                    let mut math = Math {
                        tokens: Math::tokens(&expression),
                        at: 0,
                        ids: &ids,
                        period,
                        any: ids.values().any(|s| s[period].is_some()),
                    };
                    let value = math.or();
                    assert_eq!(math.at, math.tokens.len(), "{expression}: not all read");
                    value
                })
                .collect()
        }
        None => {
            let stat = serde_norway::to_value(BTreeMap::from([
                (
                    "Metric",
                    serde_norway::to_value(BTreeMap::from([
                        ("Namespace", properties["Namespace"].clone()),
                        ("MetricName", properties["MetricName"].clone()),
                        ("Dimensions", properties["Dimensions"].clone()),
                    ]))
                    .unwrap(),
                ),
                ("Stat", properties["Statistic"].clone()),
            ]))
            .unwrap();
            series(&stat, periods, parameters)
        }
    };
    let threshold: f64 = text(&properties["Threshold"], parameters)
        .and_then(|t| t.parse().ok())
        .unwrap_or(0.0);
    let operator = text(&properties["ComparisonOperator"], parameters).unwrap_or_default();
    let evaluation = properties["EvaluationPeriods"].as_u64().unwrap_or(1) as usize;
    let needed = properties["DatapointsToAlarm"]
        .as_u64()
        .map_or(evaluation, |d| d as usize);
    let missing = text(&properties["TreatMissingData"], parameters).unwrap_or_else(|| "missing".into());
    let window = &values[values.len().saturating_sub(evaluation)..];
    let breaching = window
        .iter()
        .filter(|v| match v {
            Some(v) => match operator.as_str() {
                "GreaterThanThreshold" => *v > threshold,
                "GreaterThanOrEqualToThreshold" => *v >= threshold,
                "LessThanThreshold" => *v < threshold,
                _ => *v <= threshold,
            },
            None => missing == "breaching",
        })
        .count();
    breaching >= needed
}

fn template() -> (Value, BTreeMap<String, String>) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml");
    let template: Value = serde_norway::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut parameters = BTreeMap::new();
    for (name, parameter) in template["Parameters"].as_mapping().into_iter().flatten() {
        if let (Some(name), Some(default)) = (name.as_str(), text(&parameter["Default"], &BTreeMap::new())) {
            parameters.insert(name.to_owned(), default);
        }
    }
    parameters.insert("MetricsNamespace".to_owned(), "lakelog-test".to_owned());
    parameters.insert("AWS::StackName".to_owned(), "stack".to_owned());
    (template, parameters)
}

fn conflict() -> lake::LakeError {
    lake::LakeError::Conflict {
        uri: "s3://lake/t".into(),
        reason: "injected".into(),
    }
}

/// A game committer's pass, as its function reports it (twelve a minute; two per period here).
fn game_pass(events: Result<lake::StagedCommit, lake::LakeError>) -> serde_json::Value {
    let pass = game_sink::SinkCommit {
        events,
        rejects: Ok(lake::StagedCommit::default()),
    };
    game_sink_lambda::metrics::Reporter::new(NS, game_sink_lambda::metrics::MAX_EVENT_NAMES)
        .commit(&pass, std::time::Duration::from_millis(30))
        .document(0)
}

/// An access-log committer's pass over two tables.
fn access_pass(second: Result<lake::StagedCommit, lake::LakeError>) -> serde_json::Value {
    let tables = vec![
        ("s3://lake/access_logs/a".to_owned(), Ok(lake::StagedCommit::default())),
        ("s3://lake/access_logs/b".to_owned(), second),
    ];
    access_log_lambda::metrics::commit_pass(NS, &Ok(tables), std::time::Duration::from_millis(30)).document(0)
}

/// A canary's probe: landed within seconds, or not.
fn probe(landed: bool) -> serde_json::Value {
    let probe = canary::Probe {
        event_ids: vec!["e".into()],
        accepted: true,
        landed,
        rows: u64::from(landed),
        once: landed,
        accept_to_row_seconds: landed.then_some(12.0),
        ..canary::Probe::default()
    };
    canary_lambda::metrics::of_probe(NS, &probe).document(0)
}

/// Each period's documents: what `game` and `access` emit (either may be left out: a stack of
/// one pipeline), and, with the game pipeline, the canary's probes, landing.
fn scenario(
    game: Option<&dyn Fn(usize) -> serde_json::Value>,
    access: Option<&dyn Fn(usize) -> serde_json::Value>,
) -> Vec<Period> {
    scenario_probing(game, access, true)
}

/// [`scenario`], with the canary's probes landing or not.
fn scenario_probing(
    game: Option<&dyn Fn(usize) -> serde_json::Value>,
    access: Option<&dyn Fn(usize) -> serde_json::Value>,
    probes_land: bool,
) -> Vec<Period> {
    (0..PERIODS)
        .map(|period| {
            let mut docs = Vec::new();
            for _ in 0..2 {
                docs.extend(game.map(|g| g(period)));
                docs.extend(access.map(|a| a(period)));
                docs.extend(game.map(|_| probe(probes_land)));
            }
            store(&docs)
        })
        .collect()
}

fn firing(periods: &[Period]) -> Vec<String> {
    let (template, parameters) = template();
    template["Resources"]
        .as_mapping()
        .into_iter()
        .flatten()
        .filter(|(_, r)| r["Type"].as_str() == Some("AWS::CloudWatch::Alarm"))
        .filter(|(_, alarm)| fires(alarm, periods, &parameters))
        .filter_map(|(name, _)| name.as_str().map(str::to_owned))
        .collect()
}

#[test]
fn each_failure_breaches_its_alarm_and_a_healthy_idle_stack_none() {
    let idle_game = |_: usize| game_pass(Ok(lake::StagedCommit::default()));
    let idle_access = |_: usize| access_pass(Ok(lake::StagedCommit::default()));
    // A link waiting for one that never comes, from the start: 20 minutes at the end.
    let stranded = |period: usize| {
        game_pass(Ok(lake::StagedCommit {
            left: 1,
            oldest_left_ms: Some((period as i64 + 1) * 300_000),
            ..lake::StagedCommit::default()
        }))
    };
    let set_aside = |_: usize| {
        game_pass(Ok(lake::StagedCommit {
            set_aside: 1,
            ..lake::StagedCommit::default()
        }))
    };
    let failing = |_: usize| game_pass(Err(conflict()));
    let one_access_table_failing = |_: usize| access_pass(Err(conflict()));

    let idle = firing(&scenario(Some(&idle_game), Some(&idle_access)));
    // The maintenance alarm fires on silence by design: maintenance runs whatever the traffic.
    assert_eq!(
        idle,
        ["TablesNotMaintainedAlarm"],
        "a healthy idle stack raises an alarm"
    );

    let cases: [(&str, Vec<Period>); 7] = [
        ("stranded link", scenario(Some(&stranded), Some(&idle_access))),
        ("stranded link, game-only stack", scenario(Some(&stranded), None)),
        ("link set aside, game-only stack", scenario(Some(&set_aside), None)),
        ("every game pass failing", scenario(Some(&failing), Some(&idle_access))),
        (
            "every game pass failing, game-only stack",
            scenario(Some(&failing), None),
        ),
        (
            "one access-log table failing",
            scenario(Some(&idle_game), Some(&one_access_table_failing)),
        ),
        (
            "one access-log table failing, access-only stack",
            scenario(None, Some(&one_access_table_failing)),
        ),
    ];
    for (case, periods) in cases {
        let fired = firing(&periods);
        assert!(
            fired.iter().any(|a| a == "CommittersBehindAlarm"),
            "{case}: CommittersBehindAlarm does not fire (fired: {fired:?})"
        );
    }

    // Probes that do not land, while the committer is healthy: the canary's alarm says so; and
    // a canary that stopped, silent, does too.
    let lost = firing(&scenario_probing(Some(&idle_game), Some(&idle_access), false));
    assert!(lost.iter().any(|a| a == "ProbeNotLandedAlarm"), "{lost:?}");
    let silent: Vec<Period> = (0..PERIODS)
        .map(|period| store(&[idle_game(period), idle_access(period)]))
        .collect();
    assert!(firing(&silent).iter().any(|a| a == "ProbeNotLandedAlarm"));
}

#[test]
fn a_failed_committer_tick_alarms_while_it_is_recent_only() {
    let (template, parameters) = template();
    let alarm = &template["Resources"]["CommitterTicksFailedQueueAlarm"];
    // SQS's metrics of the queue: one tick's event sent in `failed_in`, none after.
    let queue = |failed_in: usize| -> Vec<Period> {
        (0..PERIODS)
            .map(|period| {
                let key = |name: &str| {
                    (
                        "AWS/SQS".to_owned(),
                        name.to_owned(),
                        vec![("QueueName".to_owned(), "CommitterTicksFailedQueue.QueueName".to_owned())],
                    )
                };
                let sent = f64::from(u8::from(period == failed_in));
                // The message stays visible for the queue's 14 days.
                let visible = f64::from(u8::from(period >= failed_in));
                Period::from([
                    (key("NumberOfMessagesSent"), vec![sent]),
                    (key("ApproximateNumberOfMessagesVisible"), vec![visible]),
                ])
            })
            .collect()
    };
    assert!(fires(alarm, &queue(PERIODS - 1), &parameters), "a tick failed just now");
    assert!(
        !fires(alarm, &queue(0), &parameters),
        "a tick that failed 15 minutes ago still holds the alarm"
    );
}

#[test]
fn metric_math_follows_cloudwatchs_missing_data_rules() {
    let ids = BTreeMap::from([
        ("a".to_owned(), vec![Some(1.0), None]),
        ("b".to_owned(), vec![None, None]),
    ]);
    let eval = |expression: &str, period: usize| {
        let mut math = Math {
            tokens: Math::tokens(expression),
            at: 0,
            ids: &ids,
            period,
            any: ids.values().any(|s| s[period].is_some()),
        };
        math.or()
    };
    assert_eq!(eval("a + b", 0), None, "arithmetic on a missing point is missing");
    assert_eq!(eval("FILL(a, 0) + FILL(b, 0)", 0), Some(1.0));
    assert_eq!(eval("FILL(b, 0)", 1), None, "no series has a point: nothing to fill");
    assert_eq!(eval("IF(FILL(a, 0) > 0 OR FILL(b, 0) > 5, 1, 0)", 0), Some(1.0));
    assert_eq!(eval("IF(a > 0 AND (b == 0), 1, 0)", 0), None);
}

/// Every metric of the stack's own namespace that an alarm reads is one the functions' code
/// emits, with the same name and dimensions: an alarm on a metric nobody emits reads missing data
/// for ever, and never fires. (The AWS namespaces' metrics are AWS's.)
#[test]
fn every_metric_an_alarm_reads_is_one_the_code_emits() {
    let (template, parameters) = template();
    // Passes that committed links which had waited (the wait is emitted only then), and with
    // everything a count of trouble counts (counts of what did not happen are left out).
    let busy = || {
        Ok(lake::StagedCommit {
            links: 1,
            oldest_wait_ms: Some(2_000),
            left: 1,
            stranded: 1,
            post_commit_failed: true,
            ..lake::StagedCommit::default()
        })
    };
    let mut documents = vec![game_pass(busy()), access_pass(busy())];
    let arrived = chrono::Utc::now();
    let record = lakelog_tests::StreamRecord {
        shard_id: "shardId-000000000000".into(),
        sequence_number: "1".into(),
        partition_key: "k".into(),
        data: b"{}".to_vec(),
        arrival: arrived,
    }
    .to_lambda();
    let sink = game_sink_lambda::metrics::Reporter::new(NS, game_sink_lambda::metrics::MAX_EVENT_NAMES);
    documents.extend(
        sink.batch(
            &[record],
            &game_sink::BatchReport {
                duplicates: 1,
                already_committed: 1,
                rejected: 1,
                parked: 1,
                retry_from: Some("1".into()),
                ..game_sink::BatchReport::default()
            },
            arrived.timestamp_millis(),
        )
        .iter()
        .map(|m| m.document(0)),
    );
    documents.push(
        access_log_lambda::metrics::invocation(NS, &[], &access_log_lambda::metrics::Commits::default(), 0, 0)
            .document(0),
    );
    let maintenance = maintenance_lambda::Report {
        minutes_since_maintained: Some(5),
        ..maintenance_lambda::Report::default()
    };
    documents.push(maintenance.metrics(NS).document(0));
    documents.push(probe(false));
    let emitted = store(&documents);

    let mut read = 0;
    for (name, alarm) in template["Resources"].as_mapping().into_iter().flatten() {
        if alarm["Type"].as_str() != Some("AWS::CloudWatch::Alarm") {
            continue;
        }
        let properties = &alarm["Properties"];
        let mut metrics: Vec<Value> = properties["Metrics"]
            .as_sequence()
            .into_iter()
            .flatten()
            .filter(|m| !m["MetricStat"].is_null())
            .map(|m| m["MetricStat"]["Metric"].clone())
            .collect();
        if !properties["MetricName"].is_null() {
            metrics.push(properties.clone());
        }
        for metric in metrics {
            let namespace = text(&metric["Namespace"], &parameters).unwrap_or_default();
            if namespace != NS {
                assert!(namespace.starts_with("AWS/"), "{name:?}: namespace {namespace:?}");
                continue;
            }
            let metric_name = text(&metric["MetricName"], &parameters).unwrap_or_default();
            let mut dimensions: Vec<(String, String)> = metric["Dimensions"]
                .as_sequence()
                .into_iter()
                .flatten()
                .filter_map(|d| Some((text(&d["Name"], &parameters)?, text(&d["Value"], &parameters)?)))
                .collect();
            dimensions.sort();
            assert!(
                emitted.contains_key(&(NS.to_owned(), metric_name.clone(), dimensions.clone())),
                "{name:?} reads {metric_name} {dimensions:?}, which no function emits"
            );
            read += 1;
        }
    }
    assert!(read >= 15, "only {read} metrics of the namespace read by alarms");
}
