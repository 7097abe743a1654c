//! Checks of `template.yaml` that cfn-lint and `sam validate` do not make: no IAM statement allows
//! every action (`*`) or every action of a service (`s3:*`); every function has a failure path;
//! every bucket is encrypted, blocks public access and refuses requests without TLS; queues,
//! streams and topics are encrypted. The checker is tested on small bad templates too, so that a
//! template that breaks a rule cannot pass.
//!
//! The template is read with a YAML library that keeps CloudFormation's short tags (`!Ref`,
//! `!GetAtt`, `!Sub`, `!If`) as tagged values.

use serde_norway::{Mapping, Value};

/// The logical id a `!Ref X`, `!GetAtt X.Arn` or `{"Fn::GetAtt": [X, Arn]}` points to, also as
/// the first branch of `!If [cond, !Ref X, ...]` (a resource of a pipeline that may be left out).
fn referenced_id(value: &Value) -> Option<String> {
    match value {
        Value::Tagged(tagged) if tagged.tag == "If" => tagged
            .value
            .as_sequence()
            .and_then(|parts| parts.get(1))
            .and_then(referenced_id),
        Value::Tagged(tagged) if tagged.tag == "Ref" => tagged.value.as_str().map(str::to_owned),
        Value::Tagged(tagged) if tagged.tag == "GetAtt" => match &tagged.value {
            Value::String(s) => s.split('.').next().map(str::to_owned),
            Value::Sequence(parts) => parts.first().and_then(Value::as_str).map(str::to_owned),
            _ => None,
        },
        Value::Mapping(m) => m.get("Ref").and_then(Value::as_str).map(str::to_owned).or_else(|| {
            m.get("Fn::GetAtt")
                .and_then(|v| v.get(0))
                .and_then(Value::as_str)
                .map(str::to_owned)
        }),
        _ => None,
    }
}

/// Every string inside `value`, through tags (`!If [cond, a, b]` gives both branches) and lists.
fn strings(value: &Value) -> Vec<String> {
    match value {
        Value::String(s) => vec![s.clone()],
        Value::Sequence(items) => items.iter().flat_map(strings).collect(),
        Value::Tagged(tagged) if tagged.tag == "If" => match tagged.value.as_sequence() {
            Some(parts) => parts.iter().skip(1).flat_map(strings).collect(),
            None => Vec::new(),
        },
        Value::Tagged(tagged) => strings(&tagged.value),
        _ => Vec::new(),
    }
}

/// Whether an action allows everything or every action of a service.
fn is_wildcard_action(action: &str) -> bool {
    action == "*" || action.ends_with(":*")
}

/// The mappings of `value` with their paths, depth first, through tags and lists.
fn mappings<'v>(path: String, value: &'v Value, out: &mut Vec<(String, &'v Mapping)>) {
    match value {
        Value::Mapping(m) => {
            out.push((path.clone(), m));
            for (key, child) in m {
                let key = key.as_str().unwrap_or("?");
                mappings(format!("{path}.{key}"), child, out);
            }
        }
        Value::Sequence(items) => {
            for (i, item) in items.iter().enumerate() {
                mappings(format!("{path}[{i}]"), item, out);
            }
        }
        Value::Tagged(tagged) => mappings(format!("{path}!{}", tagged.tag), &tagged.value, out),
        _ => {}
    }
}

fn resources(template: &Value) -> Vec<(String, &Value)> {
    template
        .get("Resources")
        .and_then(Value::as_mapping)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.as_str().unwrap_or("?").to_owned(), v))
                .collect()
        })
        .unwrap_or_default()
}

fn resource_type(resource: &Value) -> &str {
    resource.get("Type").and_then(Value::as_str).unwrap_or("")
}

fn truthy(value: Option<&Value>) -> bool {
    match value {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => s.eq_ignore_ascii_case("true"),
        _ => false,
    }
}

/// Everything wrong with `template`, one line each, naming the resource.
fn check(template: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let resources = resources(template);
    let resource = |id: &str| resources.iter().find(|(k, _)| k == id).map(|(_, v)| *v);

    // IAM: no statement allows every action, or every action of a service.
    for (id, value) in &resources {
        let mut found = Vec::new();
        mappings(id.clone(), value, &mut found);
        for (path, statement) in found {
            let allows = statement.get("Effect").and_then(Value::as_str) == Some("Allow");
            if !allows {
                continue;
            }
            if statement.contains_key("NotAction") {
                problems.push(format!(
                    "{path}: an Allow statement with NotAction allows almost everything"
                ));
            }
            if let Some(actions) = statement.get("Action") {
                for action in strings(actions).iter().filter(|a| is_wildcard_action(a)) {
                    problems.push(format!("{path}: Allow of wildcard action {action:?}"));
                }
            }
        }
    }

    for (id, value) in &resources {
        let properties = value.get("Properties");
        let property = |name: &str| properties.and_then(|p| p.get(name));
        match resource_type(value) {
            "AWS::Serverless::Function" | "AWS::Lambda::Function" => {
                check_function(id, value, &resource, &resources, &mut problems);
            }
            "AWS::S3::Bucket" => {
                let encrypted = property("BucketEncryption")
                    .and_then(|e| e.get("ServerSideEncryptionConfiguration"))
                    .and_then(Value::as_sequence)
                    .is_some_and(|rules| {
                        rules.iter().any(|r| {
                            r.get("ServerSideEncryptionByDefault")
                                .and_then(|d| d.get("SSEAlgorithm"))
                                .is_some()
                        })
                    });
                if !encrypted {
                    problems.push(format!("{id}: bucket without default encryption"));
                }
                let block = property("PublicAccessBlockConfiguration");
                let blocked = [
                    "BlockPublicAcls",
                    "BlockPublicPolicy",
                    "IgnorePublicAcls",
                    "RestrictPublicBuckets",
                ]
                .iter()
                .all(|k| truthy(block.and_then(|b| b.get(*k))));
                if !blocked {
                    problems.push(format!("{id}: bucket without a full public access block"));
                }
                let tls_only = resources.iter().any(|(_, policy)| {
                    resource_type(policy) == "AWS::S3::BucketPolicy"
                        && policy
                            .get("Properties")
                            .and_then(|p| p.get("Bucket"))
                            .and_then(referenced_id)
                            .as_deref()
                            == Some(id.as_str())
                        && denies_insecure_transport(policy)
                });
                if !tls_only {
                    problems.push(format!(
                        "{id}: bucket without a policy that denies requests without TLS"
                    ));
                }
            }
            "AWS::SQS::Queue" => {
                if !truthy(property("SqsManagedSseEnabled")) && property("KmsMasterKeyId").is_none() {
                    problems.push(format!("{id}: queue without encryption"));
                }
                let tls_only = resources.iter().any(|(_, policy)| {
                    resource_type(policy) == "AWS::SQS::QueuePolicy"
                        && policy
                            .get("Properties")
                            .and_then(|p| p.get("Queues"))
                            .and_then(Value::as_sequence)
                            .is_some_and(|queues| {
                                queues.iter().any(|q| referenced_id(q).as_deref() == Some(id.as_str()))
                            })
                        && denies_insecure_transport(policy)
                });
                if !tls_only {
                    problems.push(format!("{id}: queue without a policy that denies requests without TLS"));
                }
            }
            "AWS::Kinesis::Stream" => {
                let kms = property("StreamEncryption")
                    .and_then(|e| e.get("EncryptionType"))
                    .and_then(Value::as_str)
                    == Some("KMS");
                if !kms {
                    problems.push(format!("{id}: stream without KMS encryption"));
                }
            }
            "AWS::SNS::Topic" if property("KmsMasterKeyId").is_none() => {
                problems.push(format!("{id}: topic without encryption"));
            }
            _ => {}
        }
    }
    problems
}

/// Whether a bucket or queue policy has a Deny of every principal when `aws:SecureTransport` is
/// false.
fn denies_insecure_transport(policy: &Value) -> bool {
    let mut found = Vec::new();
    mappings(String::new(), policy, &mut found);
    found.iter().any(|(_, statement)| {
        statement.get("Effect").and_then(Value::as_str) == Some("Deny")
            && statement
                .get("Condition")
                .and_then(|c| c.get("Bool"))
                .and_then(|b| b.get("aws:SecureTransport"))
                .is_some_and(|v| matches!(v, Value::Bool(false)) || v.as_str() == Some("false"))
    })
}

/// A function's events each need a failure path: an SQS source a queue with a redrive policy, a
/// stream source an on-failure destination, asynchronous sources (schedules, rules, S3, SNS) a
/// dead-letter queue or an on-failure destination of the function. API events are synchronous:
/// the caller gets the error.
fn check_function<'v>(
    id: &str,
    function: &'v Value,
    resource: &dyn Fn(&str) -> Option<&'v Value>,
    resources: &[(String, &'v Value)],
    problems: &mut Vec<String>,
) {
    let properties = function.get("Properties");
    let async_failure_path = properties.is_some_and(|p| {
        p.get("DeadLetterQueue").is_some()
            || p.get("EventInvokeConfig")
                .and_then(|c| c.get("DestinationConfig"))
                .and_then(|d| d.get("OnFailure"))
                .is_some()
    }) || resources.iter().any(|(_, r)| {
        resource_type(r) == "AWS::Lambda::EventInvokeConfig"
            && r.get("Properties")
                .and_then(|p| p.get("FunctionName"))
                .and_then(referenced_id)
                .as_deref()
                == Some(id)
            && r.get("Properties")
                .and_then(|p| p.get("DestinationConfig"))
                .and_then(|d| d.get("OnFailure"))
                .is_some()
    });
    let events = properties
        .and_then(|p| p.get("Events"))
        .and_then(Value::as_mapping)
        .cloned()
        .unwrap_or_default();
    if events.is_empty() && !async_failure_path {
        problems.push(format!(
            "{id}: function without events and without a dead-letter queue or on-failure destination"
        ));
    }
    for (name, event) in &events {
        let name = name.as_str().unwrap_or("?");
        let kind = event.get("Type").and_then(Value::as_str).unwrap_or("");
        let event_properties = event.get("Properties");
        match kind {
            "SQS" => {
                let queue = event_properties.and_then(|p| p.get("Queue")).and_then(referenced_id);
                let redrive = queue
                    .as_deref()
                    .and_then(resource)
                    .and_then(|q| q.get("Properties"))
                    .and_then(|p| p.get("RedrivePolicy"))
                    .is_some_and(|r| r.get("deadLetterTargetArn").is_some());
                if !redrive {
                    problems.push(format!(
                        "{id}.{name}: SQS source {} without a redrive policy to a dead-letter queue",
                        queue.as_deref().unwrap_or("(not a queue of this template)")
                    ));
                }
            }
            "Kinesis" | "DynamoDB" => {
                let on_failure = event_properties
                    .and_then(|p| p.get("DestinationConfig"))
                    .and_then(|d| d.get("OnFailure"))
                    .and_then(|o| o.get("Destination"))
                    .is_some();
                if !on_failure {
                    problems.push(format!("{id}.{name}: {kind} source without an on-failure destination"));
                }
            }
            "Api" | "HttpApi" => {}
            _ => {
                if !async_failure_path {
                    problems.push(format!(
                        "{id}.{name}: {kind} invokes asynchronously, and the function has no dead-letter queue \
                         or on-failure destination"
                    ));
                }
            }
        }
    }
}

fn parse(yaml: &str) -> Value {
    serde_norway::from_str(yaml).unwrap()
}

#[test]
fn the_template_passes() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml");
    let template = parse(&std::fs::read_to_string(path).unwrap());
    let problems = check(&template);
    assert!(problems.is_empty(), "template.yaml:\n{}", problems.join("\n"));
    // The checker saw what it checks.
    let kinds: Vec<&str> = resources(&template).iter().map(|(_, r)| resource_type(r)).collect();
    for kind in ["AWS::Serverless::Function", "AWS::S3::Bucket", "AWS::SQS::Queue"] {
        assert!(kinds.contains(&kind), "no {kind} in the template");
    }
}

/// A compliant base: a bucket with its policy, a queue with a dead-letter queue, and a function.
const GOOD: &str = r#"
Resources:
  Bucket:
    Type: AWS::S3::Bucket
    Properties:
      BucketEncryption:
        ServerSideEncryptionConfiguration:
          - ServerSideEncryptionByDefault:
              SSEAlgorithm: AES256
      PublicAccessBlockConfiguration:
        BlockPublicAcls: true
        BlockPublicPolicy: true
        IgnorePublicAcls: true
        RestrictPublicBuckets: true
  BucketPolicy:
    Type: AWS::S3::BucketPolicy
    Properties:
      Bucket: !Ref Bucket
      PolicyDocument:
        Statement:
          - Effect: Deny
            Principal: "*"
            Action: "s3:*"
            Resource: !Sub "${Bucket.Arn}/*"
            Condition:
              Bool:
                aws:SecureTransport: "false"
  Queue:
    Type: AWS::SQS::Queue
    Properties:
      SqsManagedSseEnabled: true
      RedrivePolicy:
        deadLetterTargetArn: !GetAtt DeadLetters.Arn
        maxReceiveCount: 5
  DeadLetters:
    Type: AWS::SQS::Queue
    Properties:
      SqsManagedSseEnabled: true
  QueuePolicy:
    Type: AWS::SQS::QueuePolicy
    Properties:
      Queues:
        - !Ref Queue
        - !Ref DeadLetters
      PolicyDocument:
        Statement:
          - Effect: Deny
            Principal: "*"
            Action: "sqs:*"
            Resource: [!GetAtt Queue.Arn, !GetAtt DeadLetters.Arn]
            Condition:
              Bool:
                aws:SecureTransport: 'false'
  Function:
    Type: AWS::Serverless::Function
    Properties:
      Events:
        Messages:
          Type: SQS
          Properties:
            Queue: !GetAtt Queue.Arn
      Policies:
        - Statement:
            - Effect: Allow
              Action: ["s3:GetObject", "s3:PutObject"]
              Resource: !Sub "${Bucket.Arn}/*"
"#;

/// `GOOD` with `from` replaced by `to` (which must be there).
fn bad(from: &str, to: &str) -> Vec<String> {
    assert!(GOOD.contains(from), "{from}");
    check(&parse(&GOOD.replacen(from, to, 1)))
}

#[test]
fn the_checker_passes_a_good_template() {
    assert_eq!(check(&parse(GOOD)), Vec::<String>::new());
}

#[test]
fn wildcard_actions_fail() {
    let problems = bad(r#"Action: ["s3:GetObject", "s3:PutObject"]"#, r#"Action: "*""#);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with("Function.") && problems[0].contains("\"*\""),
        "{problems:?}"
    );
    let problems = bad(
        r#"Action: ["s3:GetObject", "s3:PutObject"]"#,
        r#"Action: ["s3:GetObject", "s3:*"]"#,
    );
    assert!(problems[0].contains("\"s3:*\""), "{problems:?}");
    // Inside a condition's branches too.
    let problems = bad(
        r#"Action: ["s3:GetObject", "s3:PutObject"]"#,
        r#"Action: !If [Cond, "s3:GetObject", "sqs:*"]"#,
    );
    assert!(problems[0].contains("\"sqs:*\""), "{problems:?}");
    let problems = bad(r#"Action: ["s3:GetObject", "s3:PutObject"]"#, r#"NotAction: "iam:*""#);
    assert!(problems[0].contains("NotAction"), "{problems:?}");
    // A Deny of every action (the TLS rule) is fine: it is in GOOD already.
}

#[test]
fn functions_without_a_failure_path_fail() {
    // An SQS source whose queue has no redrive policy.
    let problems = bad(
        "      RedrivePolicy:\n        deadLetterTargetArn: !GetAtt DeadLetters.Arn\n        maxReceiveCount: 5\n",
        "",
    );
    assert_eq!(
        problems,
        vec!["Function.Messages: SQS source Queue without a redrive policy to a dead-letter queue"]
    );
    // A Kinesis source without an on-failure destination, then with one.
    let kinesis = "          Type: Kinesis\n          Properties:\n            Stream: !GetAtt Stream.Arn\n";
    let problems = bad(
        "          Type: SQS\n          Properties:\n            Queue: !GetAtt Queue.Arn\n",
        kinesis,
    );
    assert_eq!(
        problems,
        vec!["Function.Messages: Kinesis source without an on-failure destination"]
    );
    let with_destination = format!(
        "{kinesis}            DestinationConfig:\n              OnFailure:\n                Destination: !GetAtt DeadLetters.Arn\n"
    );
    let problems = bad(
        "          Type: SQS\n          Properties:\n            Queue: !GetAtt Queue.Arn\n",
        &with_destination,
    );
    assert!(problems.is_empty(), "{problems:?}");
    // A schedule without a dead-letter queue or on-failure destination, then with one.
    let schedule = "          Type: Schedule\n          Properties:\n            Schedule: rate(1 hour)\n";
    let problems = bad(
        "          Type: SQS\n          Properties:\n            Queue: !GetAtt Queue.Arn\n",
        schedule,
    );
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with("Function.Messages: Schedule invokes asynchronously"),
        "{problems:?}"
    );
    let with_config = format!(
        "{schedule}      EventInvokeConfig:\n        DestinationConfig:\n          OnFailure:\n            Type: SQS\n            Destination: !GetAtt DeadLetters.Arn\n"
    );
    let problems = bad(
        "          Type: SQS\n          Properties:\n            Queue: !GetAtt Queue.Arn\n",
        &with_config,
    );
    assert!(problems.is_empty(), "{problems:?}");
    // No events and no failure path.
    let problems = bad(
        "      Events:\n        Messages:\n          Type: SQS\n          Properties:\n            Queue: !GetAtt Queue.Arn\n",
        "",
    );
    assert!(
        problems[0].starts_with("Function: function without events"),
        "{problems:?}"
    );
}

#[test]
fn queues_without_a_tls_policy_fail() {
    let problems = bad("        - !Ref DeadLetters\n", "");
    assert_eq!(
        problems,
        vec!["DeadLetters: queue without a policy that denies requests without TLS"]
    );
    let problems = bad("aws:SecureTransport: 'false'", "aws:SecureTransport: 'true'");
    assert_eq!(problems.len(), 2, "{problems:?}");
}

#[test]
fn buckets_without_encryption_or_tls_policy_fail() {
    let problems = bad(
        "          - ServerSideEncryptionByDefault:\n              SSEAlgorithm: AES256\n",
        "",
    );
    assert_eq!(problems, vec!["Bucket: bucket without default encryption"]);
    let problems = bad("aws:SecureTransport: \"false\"", "aws:SecureTransport: \"true\"");
    assert_eq!(
        problems,
        vec!["Bucket: bucket without a policy that denies requests without TLS"]
    );
    let problems = bad("Bucket: !Ref Bucket", "Bucket: !Ref OtherBucket");
    assert_eq!(
        problems,
        vec!["Bucket: bucket without a policy that denies requests without TLS"]
    );
    let problems = bad("        RestrictPublicBuckets: true\n", "");
    assert_eq!(problems, vec!["Bucket: bucket without a full public access block"]);
    let problems = bad(
        "      SqsManagedSseEnabled: true\n      RedrivePolicy",
        "      RedrivePolicy",
    );
    assert_eq!(problems, vec!["Queue: queue without encryption"]);
}

/// The metric names the functions write: every `.put("Name", ...)` of their metrics code.
fn emitted_metric_names() -> std::collections::BTreeSet<String> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let put = regex::Regex::new(r#"\.put(?:_when_any)?\(\s*"(\w+)""#).unwrap();
    let mut names = std::collections::BTreeSet::new();
    for file in [
        "crates/access-log-lambda/src/metrics.rs",
        "crates/game-api-lambda/src/metrics.rs",
        "crates/game-sink-lambda/src/metrics.rs",
        "crates/maintenance-lambda/src/metrics.rs",
        "crates/canary-lambda/src/metrics.rs",
    ] {
        let code = std::fs::read_to_string(format!("{root}/{file}")).unwrap();
        names.extend(put.captures_iter(&code).map(|c| c[1].to_owned()));
    }
    names
}

#[test]
fn the_dashboard_and_alarms_read_metrics_the_functions_write() {
    let emitted = emitted_metric_names();
    assert!(
        emitted.contains("LagSeconds") && emitted.contains("Events"),
        "{emitted:?}"
    );
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml");
    let template = parse(&std::fs::read_to_string(path).unwrap());
    let resources = resources(&template);

    // The dashboard: valid JSON once CloudFormation substitutes its references.
    let (_, dashboard) = resources.iter().find(|(id, _)| id == "Dashboard").expect("a dashboard");
    let body = strings(&dashboard["Properties"]["DashboardBody"]).concat();
    let body = body.replace("${MetricsNamespace}/${AWS::StackName}", "NS");
    let body = regex::Regex::new(r"\$\{[^}]+\}").unwrap().replace_all(&body, "X");
    let body: serde_json::Value = serde_json::from_str(&body).expect("the dashboard body is JSON");
    let widgets = body["widgets"].as_array().unwrap();
    let mut named = Vec::new();
    let search = regex::Regex::new(r#"MetricName="(\w+)""#).unwrap();
    for widget in widgets {
        for metric in widget["properties"]["metrics"].as_array().into_iter().flatten() {
            match metric.as_array() {
                Some(parts) if parts.first().and_then(|p| p.as_str()) == Some("NS") => {
                    named.push(parts[1].as_str().unwrap().to_owned());
                }
                Some(parts) => {
                    if let Some(expression) = parts.first().and_then(|p| p["expression"].as_str()) {
                        named.extend(search.captures_iter(expression).map(|c| c[1].to_owned()));
                    }
                }
                None => {}
            }
        }
    }
    for title in [
        "Game events per minute, by platform",
        "Bookings per minute (USD), by platform",
        "Pipeline lag",
    ] {
        assert!(
            widgets
                .iter()
                .any(|w| w["properties"]["title"].as_str().is_some_and(|t| t.starts_with(title))),
            "no widget {title}"
        );
    }

    // The alarms on the functions' own metrics.
    for (id, resource) in &resources {
        if resource_type(resource) != "AWS::CloudWatch::Alarm" {
            continue;
        }
        let mut found = Vec::new();
        mappings(id.clone(), resource, &mut found);
        for (_, mapping) in found {
            let ours = matches!(mapping.get("Namespace"), Some(Value::Tagged(sub))
                if sub.tag == "Sub" && sub.value == "${MetricsNamespace}/${AWS::StackName}");
            if ours && let Some(name) = mapping.get("MetricName").and_then(Value::as_str) {
                named.push(name.to_owned());
            }
        }
    }
    assert!(named.len() > 10, "{named:?}");
    for name in &named {
        assert!(emitted.contains(name), "{name} is read but no function writes it");
    }
}

#[test]
fn every_function_logs_to_a_group_with_a_retention() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml");
    let template = parse(&std::fs::read_to_string(path).unwrap());
    let resources = resources(&template);
    let functions: Vec<_> = resources
        .iter()
        .filter(|(_, r)| resource_type(r) == "AWS::Serverless::Function")
        .collect();
    assert_eq!(functions.len(), 5);
    for (id, function) in functions {
        let group = referenced_id(&function["Properties"]["LoggingConfig"]["LogGroup"])
            .unwrap_or_else(|| panic!("{id}: no LoggingConfig.LogGroup"));
        let (_, group) = resources.iter().find(|(g, _)| *g == group).unwrap();
        assert_eq!(resource_type(group), "AWS::Logs::LogGroup", "{id}");
        assert!(
            group["Properties"].get("RetentionInDays").is_some(),
            "{id}: no retention"
        );
    }
}

/// A raw log object outlives every notification that names it, and someone is told to redrive a
/// dead-lettered notification well before SQS drops it (14 days after it was first sent, in the
/// dead-letter queue too).
#[test]
fn raw_logs_outlive_the_notifications_that_name_them() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml");
    let template = parse(&std::fs::read_to_string(path).unwrap());
    let resources = &template["Resources"];
    let retention = |queue: &str| {
        resources[queue]["Properties"]["MessageRetentionPeriod"]
            .as_u64()
            .unwrap_or(345_600)
    };
    // A message's clock starts when it is first sent, so the longer of the two retentions bounds
    // how long a notification can wait.
    let longest_wait_days = retention("RawLogsQueue")
        .max(retention("RawLogsDeadLetterQueue"))
        .div_ceil(86_400);
    let kept_days = template["Parameters"]["RawLogsRetentionDays"]["MinValue"]
        .as_u64()
        .unwrap();
    assert!(
        kept_days > longest_wait_days,
        "RawLogsRetentionDays may be {kept_days} days; a notification can wait {longest_wait_days}"
    );
    let age_alarm = resources
        .as_mapping()
        .unwrap()
        .values()
        .find(|r| {
            let p = &r["Properties"];
            p["MetricName"] == "ApproximateAgeOfOldestMessage"
                && referenced_id(&p["Dimensions"][0]["Value"]).as_deref() == Some("RawLogsDeadLetterQueue")
        })
        .expect("an alarm on the age of the raw-logs dead letters");
    let threshold = age_alarm["Properties"]["Threshold"].as_u64().unwrap();
    assert!(
        threshold <= retention("RawLogsDeadLetterQueue") / 2,
        "the alarm fires after {threshold} s, too late to redrive"
    );
}

/// The stack touches only what it owns: only the raw-logs bucket of the expected account may
/// notify the ingest queue (a bucket name can be taken again by anyone once deleted), and the
/// account-wide API Gateway logging role the stack may set stays when the stack is deleted.
#[test]
fn the_stack_reaches_no_further_than_it_owns() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml");
    let template = parse(&std::fs::read_to_string(path).unwrap());
    let resources = &template["Resources"];
    let statements = resources["RawLogsQueuePolicy"]["Properties"]["PolicyDocument"]["Statement"]
        .as_sequence()
        .unwrap();
    let allow = statements.iter().find(|s| s["Effect"] == "Allow").unwrap();
    let source_account = &allow["Condition"]["StringEquals"]["aws:SourceAccount"];
    assert!(
        strings(source_account).iter().any(|s| s == "RawLogsBucketOwner"),
        "the notifications' source account is not checked: {source_account:?}"
    );
    // The API function may read usage plans (which hold no key values), and keys only behind the
    // HTTP API front, which checks none (the function does).
    let api_policies = serde_norway::to_string(&resources["GameEventsApiFunction"]["Properties"]["Policies"]).unwrap();
    assert!(api_policies.contains("::/usageplans\n"), "{api_policies}");
    let statements = resources["GameEventsApiFunction"]["Properties"]["Policies"][0]["Statement"]
        .as_sequence()
        .unwrap();
    let mut key_readers = 0;
    for statement in statements {
        let text = serde_norway::to_string(statement).unwrap();
        if !text.contains("/apikeys") {
            continue;
        }
        key_readers += 1;
        let behind_http_front = match statement {
            Value::Tagged(tagged) => {
                tagged.tag == "If"
                    && tagged.value[0] == "HttpFront"
                    && matches!(&tagged.value[2], Value::Tagged(none) if none.tag == "Ref" && none.value == "AWS::NoValue")
            }
            _ => false,
        };
        assert!(
            behind_http_front,
            "the API function may read keys without the HTTP API front: {text}"
        );
    }
    assert_eq!(key_readers, 1, "{api_policies}");
    // Ingestion reads log objects of the raw-logs bucket's account only.
    let ingest_vars = &resources["AccessLogIngestFunction"]["Properties"]["Environment"]["Variables"];
    assert!(
        strings(&ingest_vars["RAW_LOGS_BUCKET_OWNER"])
            .iter()
            .any(|s| s == "RawLogsBucketOwner"),
        "{ingest_vars:?}"
    );
    // Other accounts' raw-logs buckets: only buckets those accounts own may notify and be read.
    let ingest_policies =
        serde_norway::to_string(&resources["AccessLogIngestFunction"]["Properties"]["Policies"]).unwrap();
    let queue_policy = serde_norway::to_string(&resources["RawLogsQueuePolicy"]["Properties"]).unwrap();
    for (what, text, key) in [
        (
            "ingest reads",
            &ingest_policies,
            "s3:ResourceAccount: !Ref ObservedAccounts",
        ),
        (
            "queue admits",
            &queue_policy,
            "aws:SourceAccount: !Ref ObservedAccounts",
        ),
    ] {
        assert!(text.contains(key), "{what} other accounts' buckets unchecked: {text}");
    }
    // A throttled game is told when to send again.
    let responses = &resources["GameEventsApi"]["Properties"]["GatewayResponses"];
    for kind in ["THROTTLED", "QUOTA_EXCEEDED"] {
        assert!(
            responses[kind]["ResponseParameters"]["Headers"]["Retry-After"].is_string(),
            "{kind}: {responses:?}"
        );
    }
    for retained in ["ApiGatewayLoggingRoleResource", "ApiGatewayAccount"] {
        assert_eq!(
            resources[retained]["DeletionPolicy"], "Retain",
            "{retained} goes with the stack, and with it every API's logs"
        );
    }
}

/// `Pipelines` leaves out one pipeline: each resource of it carries its condition (cfn-lint then
/// checks that nothing unconditional refers to it, on each choice), and no alarm fires on silence
/// alone except those on maintenance and the canary, which run on a schedule whatever the traffic.
#[test]
fn each_pipeline_can_be_left_out_and_idle_raises_no_alarm() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml");
    let template = parse(&std::fs::read_to_string(path).unwrap());
    let declared = &template["Resources"];
    let condition = |name: &str| declared[name]["Condition"].as_str().map(str::to_owned);
    for name in [
        "RawLogsQueue",
        "RawLogsDeadLetterQueue",
        "AccessLogIngestFunction",
        "RawLogsQueueAgeAlarm",
    ] {
        assert_eq!(condition(name).as_deref(), Some("AccessLogPipeline"), "{name}");
    }
    for name in [
        "GameEventsStream",
        "GameEventsApi",
        "GameEventsApiFunction",
        "GameEventsSinkFunction",
        "GameEventsSinkLagAlarm",
        "GameEventsPerHourQuery",
    ] {
        assert_eq!(condition(name).as_deref(), Some("GameEventsPipeline"), "{name}");
    }
    // The first game's, within the game pipeline's, and only when there is one.
    for name in ["FirstGameApiKey", "FirstGameUsagePlan", "FirstGameUsagePlanKey"] {
        assert_eq!(condition(name).as_deref(), Some("FirstGameInStack"), "{name}");
    }
    let first_game = serde_norway::to_string(&template["Conditions"]["FirstGameInStack"]).unwrap();
    assert!(
        first_game.contains("GameEventsPipeline") && first_game.contains("FirstGameId"),
        "{first_game}"
    );
    for (name, resource) in resources(&template) {
        if resource_type(resource) != "AWS::CloudWatch::Alarm"
            || ["TablesNotMaintainedAlarm", "ProbeNotLandedAlarm"].contains(&name.as_str())
        {
            continue;
        }
        assert_eq!(
            resource["Properties"]["TreatMissingData"].as_str(),
            Some("notBreaching"),
            "{name} fires on silence"
        );
    }
}

/// Every saved Athena query parses in Athena's dialect (Trino's SQL, as sqlglot's `athena`
/// dialect reads it), with the template's `${...}` names in place of the stack's; the game and
/// access tests run them on DuckDB against the reports.
#[test]
fn the_saved_queries_parse_as_athena_sql() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml");
    let template = parse(&std::fs::read_to_string(path).unwrap());
    let names = regex::Regex::new(r"\$\{(\w+)\}").unwrap();
    let mut queries = serde_json::Map::new();
    for (name, resource) in resources(&template) {
        if resource_type(resource) != "AWS::Athena::NamedQuery" {
            continue;
        }
        let sql = match &resource["Properties"]["QueryString"] {
            Value::Tagged(sub) if sub.tag == "Sub" => sub.value.as_str().unwrap_or_default().to_owned(),
            Value::String(sql) => sql.clone(),
            other => panic!("{name}: a QueryString that is not SQL: {other:?}"),
        };
        let sql = names.replace_all(&sql, "stack_$1").into_owned();
        queries.insert(name, serde_json::Value::String(sql));
    }
    assert!(queries.len() >= 20, "{} saved queries", queries.len());
    let check = r#"
import json, sys
import sqlglot
failed = []
for name, sql in json.load(sys.stdin).items():
    try:
        sqlglot.parse_one(sql, read="athena", error_level=sqlglot.ErrorLevel.RAISE)
    except Exception as e:
        failed.append(f"{name}: {e}")
print("\n".join(failed))
sys.exit(1 if failed else 0)
"#;
    let mut child = std::process::Command::new(lakelog_tests::python())
        .args(["-c", check])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(serde_json::Value::Object(queries).to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "saved queries that Athena's dialect does not parse:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `lakelog games set --pseudonymise` waits `SETTING_SETTLES`, reckoned with the API function's
/// timeout: a longer timeout in the template would let an instance write raw ids after the
/// command returned.
#[test]
fn a_changed_game_setting_settles_within_the_api_functions_timeout() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml");
    let template = parse(&std::fs::read_to_string(path).unwrap());
    let timeout = template["Resources"]["GameEventsApiFunction"]["Properties"]["Timeout"]
        .as_u64()
        .expect("GameEventsApiFunction has a Timeout");
    assert_eq!(game_api::API_FUNCTION_TIMEOUT.as_secs(), timeout);
    assert!(game_api::SETTING_SETTLES >= game_api::KEY_CACHE_TTL + 2 * game_api::API_FUNCTION_TIMEOUT);
}

/// A custom domain (`GameEventsDomainName`) maps the front in use and is refused without its
/// certificate, and the endpoint clients ship with prefers it to either `execute-api` URL.
#[test]
fn the_custom_domain_follows_the_front_and_clients_are_given_it() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml");
    let template = parse(&std::fs::read_to_string(path).unwrap());
    let if_http = |value: &Value| -> Option<(String, String)> {
        let Value::Tagged(tagged) = value else { return None };
        if tagged.tag != "If" || tagged.value[0] != "HttpFront" {
            return None;
        }
        Some((referenced_id(&tagged.value[1])?, referenced_id(&tagged.value[2])?))
    };
    let mapping = &template["Resources"]["GameEventsDomainMapping"];
    assert_eq!(mapping["Condition"], "CustomDomain");
    assert_eq!(
        if_http(&mapping["Properties"]["ApiId"]),
        Some(("GameEventsHttpApi".into(), "GameEventsApi".into()))
    );
    assert_eq!(
        if_http(&mapping["Properties"]["Stage"]),
        Some(("GameEventsHttpApiStage".into(), "GameEventsApiprodStage".into()))
    );
    let condition = serde_norway::to_string(&template["Conditions"]["CustomDomain"]).unwrap();
    for needed in ["GameEventsDomainName", "GameEventsCertificateArn"] {
        assert!(condition.contains(needed), "{condition}");
    }
    let rule = serde_norway::to_string(&template["Rules"]["DomainNeedsCertificate"]).unwrap();
    assert!(rule.contains("GameEventsCertificateArn"), "{rule}");
    let endpoint = serde_norway::to_string(&template["Outputs"]["GameEventsEndpoint"]["Value"]).unwrap();
    let domain = endpoint.find("https://${GameEventsDomainName}/events");
    let generated = endpoint.find("execute-api");
    assert!(domain.is_some() && domain < generated, "{endpoint}");
    // The canary probes the endpoint clients are given, whichever it is.
    let canary = &template["Resources"]["CanaryFunction"];
    assert_eq!(
        serde_norway::to_string(&canary["Properties"]["Environment"]["Variables"]["GAME_EVENTS_URL"]).unwrap(),
        endpoint
    );
    let condition = serde_norway::to_string(&template["Conditions"]["CanaryInStack"]).unwrap();
    assert!(
        condition.contains("GameEventsPipeline") && condition.contains("CanarySchedule"),
        "{condition}"
    );
    for name in ["CanaryApiKey", "CanaryUsagePlan", "ProbeNotLandedAlarm"] {
        assert_eq!(template["Resources"][name]["Condition"], "CanaryInStack", "{name}");
    }
}

/// Every saved query says on its first lines which tables it reads, by the parameters that name
/// them, and whether each is a Delta table (with its Iceberg view) or S3 Inventory's.
#[test]
fn the_saved_queries_name_the_tables_they_read() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml");
    let template = parse(&std::fs::read_to_string(path).unwrap());
    let reads = regex::Regex::new(r#"FROM "\$\{GlueDatabase\}"\."\$\{(\w+)\}""#).unwrap();
    let mut queries = 0;
    for (id, resource) in resources(&template) {
        if resource_type(resource) != "AWS::Athena::NamedQuery" {
            continue;
        }
        queries += 1;
        let Value::Tagged(sub) = &resource["Properties"]["QueryString"] else {
            panic!("{id}: no !Sub QueryString");
        };
        let sql = sub.value.as_str().unwrap_or_default();
        let header: String = sql
            .lines()
            .take_while(|l| l.trim_start().starts_with("--"))
            .collect::<Vec<_>>()
            .join(" ");
        assert!(header.starts_with("-- Reads the "), "{id}: {header:?}");
        for table in reads.captures_iter(sql).map(|c| c[1].to_owned()) {
            let named = format!("${{GlueDatabase}}.${{{table}}}");
            assert!(
                header.contains(&named),
                "{id} reads {table} and does not say so: {header}"
            );
            if table == "InventoryQueryTable" {
                assert!(header.contains("S3 Inventory table"), "{id}: {header}");
            } else {
                assert!(header.contains(&format!("${{{table}}}_iceberg")), "{id}: {header}");
            }
        }
    }
    assert_eq!(queries, 25);
}

/// Every saved query of `game_events` leaves out the canary's probe game, as the reports do.
#[test]
fn the_saved_game_queries_leave_the_probes_out() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml");
    let template = parse(&std::fs::read_to_string(path).unwrap());
    let mut queries = 0;
    for (id, resource) in resources(&template) {
        let sql = serde_norway::to_string(&resource["Properties"]["QueryString"]).unwrap();
        if resource_type(resource) != "AWS::Athena::NamedQuery" || !sql.contains("GameEventsTablePrefix") {
            continue;
        }
        queries += 1;
        let reads = sql
            .matches(r#"FROM "${GlueDatabase}"."${GameEventsTablePrefix}""#)
            .count();
        let leaves_out = sql.matches("gameId IS DISTINCT FROM 'lakelog-probe'").count();
        assert_eq!(reads, leaves_out, "{id} counts the probes");
    }
    assert_eq!(queries, 15);
}

/// The Serverless Application Repository's metadata names the workspace's version and license,
/// so that a published release says what it is.
#[test]
fn the_repository_metadata_follows_the_workspace() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml");
    let template = parse(&std::fs::read_to_string(path).unwrap());
    let application = &template["Metadata"]["AWS::ServerlessRepo::Application"];
    let manifest = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml")).unwrap();
    let field = |name: &str| {
        manifest
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name} = \"")))
            .and_then(|v| v.strip_suffix('"'))
            .map(str::to_owned)
    };
    assert_eq!(
        application["SemanticVersion"].as_str().map(str::to_owned),
        field("version")
    );
    assert_eq!(
        application["SpdxLicenseId"].as_str().map(str::to_owned),
        field("license")
    );
    assert_eq!(
        application["SourceCodeUrl"].as_str().map(str::to_owned),
        field("repository")
    );
    for file in ["LicenseUrl", "ReadmeUrl"] {
        let name = application[file].as_str().unwrap();
        assert!(
            std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
                .join(name)
                .is_file(),
            "{file}: {name}"
        );
    }
}
