//! Configuration: table locations and limits, read and validated once.

use std::fmt;

pub use env_config::ConfigError;
use env_config::{TABLE_LOCATION_FORMS, Vars, is_table_location};
use lake::maintenance::Settle;

use crate::objects::LogSource;

/// The placeholder that makes one table per observed bucket.
pub const BUCKET_PLACEHOLDER: &str = "{bucket}";
/// The placeholder of the observed bucket's account, from the log object's key ([`LogSource`]).
pub const ACCOUNT_PLACEHOLDER: &str = "{account}";
/// The placeholder of the observed bucket's region, from the log object's key ([`LogSource`]).
pub const REGION_PLACEHOLDER: &str = "{region}";

/// Where access-log rows go: a table location, with `{bucket}` for one table per observed bucket,
/// and `{account}` and `{region}` to keep the buckets of several accounts and regions apart
/// (bucket names repeat across partitions, and a deleted bucket's name can be taken by another
/// account). The placeholders are in the location's last path segment, so that the tables are the
/// folders of one place: `s3://lake/access_logs/{account}_{region}_{bucket}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableTemplate(String);

impl TableTemplate {
    /// Validates a location such as `s3://lake/access_logs/{bucket}` or `./lake/access_logs`.
    pub fn parse(name: &'static str, value: &str) -> Result<Self, ConfigError> {
        let invalid = |reason: &str| ConfigError::invalid(name, value, reason);
        let value = value.trim();
        if value.is_empty() {
            return Err(ConfigError::Missing { name });
        }
        let without = without_placeholders(value);
        if without.contains('{') || without.contains('}') {
            return Err(invalid("the placeholders are {bucket}, {account} and {region}"));
        }
        if value.split_once('{').is_some_and(|(_, after)| after.contains('/')) {
            return Err(invalid("the placeholders go in the last path segment"));
        }
        if !is_table_location(value) {
            return Err(invalid(TABLE_LOCATION_FORMS));
        }
        Ok(Self(value.to_owned()))
    }

    /// Whether the location gives several tables (it has a placeholder).
    pub fn per_bucket(&self) -> bool {
        self.0.contains('{')
    }

    /// Whether the location needs the log object's [`LogSource`] (`{account}` or `{region}`).
    pub fn needs_source(&self) -> bool {
        self.0.contains(ACCOUNT_PLACEHOLDER) || self.0.contains(REGION_PLACEHOLDER)
    }

    /// The folder of the tables when there are several: the location up to its first placeholder.
    pub fn folder(&self) -> Option<&str> {
        self.0.split_once('{').map(|(folder, _)| folder)
    }

    /// The table of `bucket`'s rows from a log object of `source`; `None` when the location needs
    /// a source and there is none.
    pub fn resolve(&self, bucket: &str, source: Option<&LogSource>) -> Option<String> {
        let mut table = self.0.replace(BUCKET_PLACEHOLDER, bucket);
        if self.needs_source() {
            let source = source?;
            table = table
                .replace(ACCOUNT_PLACEHOLDER, &source.account)
                .replace(REGION_PLACEHOLDER, &source.region);
        }
        Some(table)
    }

    /// The default rejects table: `_rejects` appended to the last path segment without its
    /// placeholders (bucket names cannot contain `_`, so it never names a bucket's table):
    /// `s3://lake/access_logs/{bucket}` -> `s3://lake/access_logs/_rejects`.
    pub fn default_rejects(&self) -> String {
        let trimmed = self.0.trim_end_matches('/');
        let (parent, last) = trimmed.rsplit_once('/').unwrap_or(("", trimmed));
        let last = without_placeholders(last);
        // What separated the placeholders alone is no name.
        let last = if last.bytes().all(|b| b == b'_') {
            ""
        } else {
            last.as_str()
        };
        if parent.is_empty() {
            format!("{last}_rejects")
        } else {
            format!("{parent}/{last}_rejects")
        }
    }
}

/// `text` without the placeholders of a table location.
fn without_placeholders(text: &str) -> String {
    text.replace(BUCKET_PLACEHOLDER, "")
        .replace(ACCOUNT_PLACEHOLDER, "")
        .replace(REGION_PLACEHOLDER, "")
}

impl fmt::Display for TableTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Whether `name` is a valid S3 bucket name, and so safe as a path segment of a table location.
pub fn is_bucket_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    (3..=63).contains(&bytes.len())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'.' || *b == b'-')
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && !name.contains("..")
}

/// The settings of the access-log ingestion, as the Lambda reads them from its environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `ACCESS_LOG_TABLE_URI`: where rows go.
    pub table: TableTemplate,
    /// `ACCESS_LOG_REJECTS_TABLE_URI`: where lines that cannot be parsed go.
    pub rejects: String,
    /// `RAW_LOGS_ROLE_ARN`: a role to assume for reading raw logs of another account.
    pub raw_logs_role_arn: Option<String>,
    /// `RAW_LOGS_BUCKET_OWNER`: the accounts that own the raw-logs buckets, separated by commas;
    /// objects of a bucket none of them owns are refused (unset: any bucket the role may read).
    pub raw_logs_bucket_owners: Vec<String>,
    /// `ACCESS_LOG_TRUNCATE_IP`: `true` keeps of each `remote_ip` its network only (default
    /// `false`).
    pub truncate_ips: bool,
    /// `INGEST_CONCURRENCY`: objects read at once (1 to 64, default 4).
    pub concurrency: usize,
    /// `ACCESS_LOG_SETTLE_FILES`: small files in a table's open partitions after which they are
    /// packed between commits (default [`Settle::DEFAULT_FILES`]; 0: never).
    pub settle: Option<Settle>,
}

impl Config {
    /// Reads the settings through `var` (the process environment in the Lambda).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let vars = Vars::new(var);
        let table = TableTemplate::parse("ACCESS_LOG_TABLE_URI", &vars.required("ACCESS_LOG_TABLE_URI")?)?;
        let rejects = match vars.optional("ACCESS_LOG_REJECTS_TABLE_URI") {
            Some(value) => {
                let parsed = TableTemplate::parse("ACCESS_LOG_REJECTS_TABLE_URI", &value)?;
                if parsed.per_bucket() {
                    return Err(ConfigError::invalid(
                        "ACCESS_LOG_REJECTS_TABLE_URI",
                        value,
                        "must name one table: rejected lines may have no bucket",
                    ));
                }
                parsed.0
            }
            None => table.default_rejects(),
        };
        let raw_logs_role_arn = vars.optional("RAW_LOGS_ROLE_ARN");
        if let Some(arn) = &raw_logs_role_arn
            && !arn.starts_with("arn:")
        {
            return Err(ConfigError::invalid(
                "RAW_LOGS_ROLE_ARN",
                arn.as_str(),
                "expected a role ARN (arn:aws:iam::<account>:role/<name>)",
            ));
        }
        let owners_text = vars.optional("RAW_LOGS_BUCKET_OWNER").unwrap_or_default();
        let mut raw_logs_bucket_owners = Vec::new();
        for owner in owners_text.split(',').map(str::trim).filter(|o| !o.is_empty()) {
            if !(owner.len() == 12 && owner.bytes().all(|b| b.is_ascii_digit())) {
                return Err(ConfigError::invalid(
                    "RAW_LOGS_BUCKET_OWNER",
                    owners_text.as_str(),
                    "expected 12-digit AWS account ids, separated by commas",
                ));
            }
            if !raw_logs_bucket_owners.iter().any(|o| o == owner) {
                raw_logs_bucket_owners.push(owner.to_owned());
            }
        }
        let truncate_ips = match vars.optional("ACCESS_LOG_TRUNCATE_IP").as_deref() {
            None | Some("false") => false,
            Some("true") => true,
            Some(other) => {
                return Err(ConfigError::invalid(
                    "ACCESS_LOG_TRUNCATE_IP",
                    other,
                    "expected true or false",
                ));
            }
        };
        let concurrency = vars.number("INGEST_CONCURRENCY", 4, 1..=64)? as usize;
        let settle_files = vars.number("ACCESS_LOG_SETTLE_FILES", Settle::DEFAULT_FILES as u64, 0..=1_000_000)?;
        Ok(Self {
            table,
            rejects,
            raw_logs_role_arn,
            raw_logs_bucket_owners,
            truncate_ips,
            concurrency,
            settle: (settle_files > 0).then(|| Settle::after(settle_files as usize)),
        })
    }

    /// Reads the settings from the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_vars(env_config::env_var)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        Config::from_vars(env_config::from_pairs(vars))
    }

    #[test]
    fn defaults_and_templates() {
        let c = config(&[("ACCESS_LOG_TABLE_URI", "s3://lake/access_logs/{bucket}")]).unwrap();
        assert!(c.table.per_bucket());
        assert_eq!(
            c.table.resolve("web-assets", None).as_deref(),
            Some("s3://lake/access_logs/web-assets")
        );
        assert_eq!(c.rejects, "s3://lake/access_logs/_rejects");
        assert_eq!(c.concurrency, 4);
        assert_eq!(c.raw_logs_role_arn, None);
        assert!(c.raw_logs_bucket_owners.is_empty());
        assert!(!c.truncate_ips);
        let truncated = config(&[
            ("ACCESS_LOG_TABLE_URI", "s3://lake/t"),
            ("ACCESS_LOG_TRUNCATE_IP", "true"),
        ])
        .unwrap();
        assert!(truncated.truncate_ips);
        let err = config(&[
            ("ACCESS_LOG_TABLE_URI", "s3://lake/t"),
            ("ACCESS_LOG_TRUNCATE_IP", "yes"),
        ])
        .unwrap_err();
        assert!(err.to_string().starts_with("ACCESS_LOG_TRUNCATE_IP=\"yes\""), "{err}");
        assert_eq!(c.settle, Some(Settle::default()));
        let owned = config(&[
            ("ACCESS_LOG_TABLE_URI", "s3://lake/t"),
            ("RAW_LOGS_BUCKET_OWNER", " 123456789012 ,111111111111,,123456789012"),
        ])
        .unwrap();
        assert_eq!(owned.raw_logs_bucket_owners, ["123456789012", "111111111111"]);
        let never = config(&[
            ("ACCESS_LOG_TABLE_URI", "s3://lake/t"),
            ("ACCESS_LOG_SETTLE_FILES", "0"),
        ])
        .unwrap();
        assert_eq!(never.settle, None);
        let often = config(&[
            ("ACCESS_LOG_TABLE_URI", "s3://lake/t"),
            ("ACCESS_LOG_SETTLE_FILES", "50"),
        ])
        .unwrap();
        assert_eq!(often.settle, Some(Settle::after(50)));
        let c = config(&[
            ("ACCESS_LOG_TABLE_URI", " s3://lake/t "),
            ("INGEST_CONCURRENCY", " "),
            ("RAW_LOGS_ROLE_ARN", ""),
            ("ACCESS_LOG_REJECTS_TABLE_URI", ""),
        ])
        .unwrap();
        assert_eq!(
            (c.concurrency, c.raw_logs_role_arn, c.rejects.as_str()),
            (4, None, "s3://lake/t_rejects")
        );
        let accounts = TableTemplate::parse("X", "s3://lake/access_logs/{account}_{region}_{bucket}").unwrap();
        assert!(accounts.per_bucket() && accounts.needs_source());
        assert_eq!(accounts.folder(), Some("s3://lake/access_logs/"));
        assert_eq!(accounts.default_rejects(), "s3://lake/access_logs/_rejects");
        assert_eq!(accounts.resolve("web", None), None);
        let source = LogSource {
            account: "123456789012".into(),
            region: "eu-west-1".into(),
        };
        assert_eq!(
            accounts.resolve("web", Some(&source)).as_deref(),
            Some("s3://lake/access_logs/123456789012_eu-west-1_web")
        );
        for bad in ["s3://lake/{account}/{bucket}", "s3://lake/{owner}", "s3://lake/{bucket"] {
            assert!(TableTemplate::parse("X", bad).is_err(), "{bad}");
        }
        let c = config(&[("ACCESS_LOG_TABLE_URI", "./lake/access_logs")]).unwrap();
        assert_eq!(c.rejects, "./lake/access_logs_rejects");
        assert_eq!(
            TableTemplate::parse("X", "logs_{bucket}").unwrap().default_rejects(),
            "logs__rejects"
        );
    }

    #[test]
    fn bad_settings_name_the_variable() {
        let err = config(&[]).unwrap_err();
        assert_eq!(err.to_string(), "ACCESS_LOG_TABLE_URI is not set");
        let err = config(&[("ACCESS_LOG_TABLE_URI", "s3://lake/{table}")]).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("ACCESS_LOG_TABLE_URI=\"s3://lake/{table}\""),
            "{err}"
        );
        let err = config(&[("ACCESS_LOG_TABLE_URI", "gs://lake/t")]).unwrap_err();
        assert!(err.to_string().contains("use s3://"), "{err}");
        let err = config(&[("ACCESS_LOG_TABLE_URI", "s3://l/t"), ("INGEST_CONCURRENCY", "0")]).unwrap_err();
        assert!(err.to_string().starts_with("INGEST_CONCURRENCY=\"0\""), "{err}");
        let err = config(&[
            ("ACCESS_LOG_TABLE_URI", "s3://l/t"),
            ("ACCESS_LOG_SETTLE_FILES", "many"),
        ])
        .unwrap_err();
        assert!(err.to_string().starts_with("ACCESS_LOG_SETTLE_FILES=\"many\""), "{err}");
        let err = config(&[("ACCESS_LOG_TABLE_URI", "s3://l/t"), ("RAW_LOGS_ROLE_ARN", "role")]).unwrap_err();
        assert!(err.to_string().starts_with("RAW_LOGS_ROLE_ARN"), "{err}");
        let err = config(&[("ACCESS_LOG_TABLE_URI", "s3://l/t"), ("RAW_LOGS_BUCKET_OWNER", "12345")]).unwrap_err();
        assert!(err.to_string().starts_with("RAW_LOGS_BUCKET_OWNER=\"12345\""), "{err}");
        let err = config(&[
            ("ACCESS_LOG_TABLE_URI", "s3://l/{bucket}"),
            ("ACCESS_LOG_REJECTS_TABLE_URI", "s3://l/{bucket}_rejects"),
        ])
        .unwrap_err();
        assert!(err.to_string().contains("must name one table"), "{err}");
    }

    #[test]
    fn bucket_names() {
        for ok in ["abc", "web-assets", "logs.example.com", "a1b"] {
            assert!(is_bucket_name(ok), "{ok}");
        }
        for bad in ["ab", "../x", "Upper", "a_b", "-ab", "ab-", "a..b", &"a".repeat(64)] {
            assert!(!is_bucket_name(bad), "{bad}");
        }
    }
}
