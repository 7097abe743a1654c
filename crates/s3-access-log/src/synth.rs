//! Seeded generator of realistic access-log corpora: every field era, the quoting quirks S3 really
//! writes, and optionally malformed lines. The same seed always gives the same bytes.

use std::borrow::Cow;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::record::AccessLogRecord;
use crate::render::write_line;

const OPERATIONS: [&str; 8] = [
    "REST.GET.OBJECT",
    "REST.GET.OBJECT",
    "REST.GET.OBJECT",
    "REST.HEAD.OBJECT",
    "REST.PUT.OBJECT",
    "REST.GET.BUCKET",
    "REST.COPY.OBJECT_GET",
    "S3.TRANSITION_SIA.OBJECT",
];

const USER_AGENTS: [&str; 5] = [
    "aws-sdk-java/2.20.0 Linux/5.10 OpenJDK_64-Bit_Server_VM/17.0.6+10-LTS Java/17.0.6 vendor/Amazon.com_Inc. exec-env/AWS_ECS_FARGATE io/sync http/Apache cfg/retry-mode/legacy",
    "aws-cli/2.13.0 Python/3.11.4 Linux/5.15 exe/x86_64.amzn.2 prompt/off command/s3.cp",
    "Boto3/1.28.0 md/Botocore#1.31.0 ua/2.0 os/linux#5.10 md/arch#x86_64 lang/python#3.10.12 cfg/retry-mode#legacy Botocore/1.31.0",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36",
    "S3Console/0.4",
];

/// Era weights: the share of lines with 17, 18, 24, 25, 26 and 27 fields.
const ERAS: [(usize, u32); 6] = [(17, 5), (18, 5), (24, 10), (25, 10), (26, 20), (27, 50)];

/// Settings of a generated corpus.
#[derive(Debug, Clone)]
pub struct SynthConfig {
    /// Seed of the generator.
    pub seed: u64,
    /// Time of the first line, microseconds since the epoch.
    pub start_micros: i64,
    /// Buckets the requests are made to.
    pub buckets: Vec<String>,
    /// Share of lines with a quoting quirk (quotes in URI, referer or user agent, `-` status...).
    pub quirk_rate: f64,
    /// Share of lines that are malformed and must be rejected.
    pub malformed_rate: f64,
}

impl Default for SynthConfig {
    fn default() -> Self {
        Self {
            seed: 42,
            start_micros: 1_717_200_000_000_000, // 2024-06-01T00:00:00Z
            buckets: vec!["analytics-lake".into(), "ml-features".into(), "web-assets".into()],
            quirk_rate: 0.05,
            malformed_rate: 0.0,
        }
    }
}

/// Generates lines one at a time.
#[derive(Debug)]
pub struct Synth {
    config: SynthConfig,
    rng: StdRng,
    now: i64,
    lines: u64,
    malformed: u64,
}

impl Synth {
    /// A generator for `config`.
    pub fn new(config: SynthConfig) -> Self {
        Self {
            rng: StdRng::seed_from_u64(config.seed),
            now: config.start_micros,
            config,
            lines: 0,
            malformed: 0,
        }
    }

    /// Lines written so far.
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// Malformed lines written so far.
    pub fn malformed(&self) -> u64 {
        self.malformed
    }

    /// Appends lines to `out` until it holds at least `bytes` bytes.
    pub fn fill(&mut self, out: &mut Vec<u8>, bytes: usize) {
        while out.len() < bytes {
            self.write_line(out);
        }
    }

    /// Appends one line (and its `\n`) to `out`.
    pub fn write_line(&mut self, out: &mut Vec<u8>) {
        self.lines += 1;
        self.now += self.rng.random_range(0..2_000_000);
        if self.rng.random_bool(self.config.malformed_rate) {
            self.malformed += 1;
            self.write_malformed(out);
            return;
        }
        let mut fields = 27;
        let pick = self.rng.random_range(0..100);
        let mut acc = 0;
        for (era, weight) in ERAS {
            acc += weight;
            if pick < acc {
                fields = era;
                break;
            }
        }
        let record = self.record(fields);
        write_line(&record, fields, out);
    }

    fn record(&mut self, fields: usize) -> AccessLogRecord<'static> {
        let rng = &mut self.rng;
        let bucket = self.config.buckets[rng.random_range(0..self.config.buckets.len())].clone();
        let operation = OPERATIONS[rng.random_range(0..OPERATIONS.len())];
        let day = rng.random_range(1..29);
        let key = match rng.random_range(0..4) {
            0 => format!(
                "events/clicks/dt=2024-06-{day:02}/part-{:05}.snappy.parquet",
                rng.random_range(0..200)
            ),
            1 => format!("snapshots/customers/2024/06/{day:02}/customers.csv.gz"),
            2 => format!(
                "models/v{}/weights file+{}.bin",
                rng.random_range(1..9),
                rng.random_range(0..50)
            ),
            _ => format!("raw/café/{}.json", rng.random_range(0..100_000)),
        };
        let is_get = operation.contains("GET") || operation.contains("HEAD");
        let size = rng.random_range(100..50_000_000i64);
        let (status, error) = match rng.random_range(0..100) {
            0..=1 => (403, Some("AccessDenied")),
            2..=3 => (404, Some("NoSuchKey")),
            _ => (200, None),
        };
        let requester_id = rng.random_range(0..20);
        let mut r = AccessLogRecord {
            bucket_owner: Some(Cow::Borrowed(
                "79a59df900b949e55d96a1e698fbacedfd6e09d98eacf8f8d5218e7cd47ef2be",
            )),
            request_time: self.now - self.now % 1_000_000,
            remote_ip: Some(
                format!(
                    "10.{}.{}.{}",
                    rng.random_range(0..256),
                    rng.random_range(0..256),
                    rng.random_range(1..255)
                )
                .into(),
            ),
            requester: Some(format!("arn:aws:sts::123456789012:assumed-role/etl-{requester_id}/session").into()),
            request_id: Some(format!("{:016X}", rng.random::<u64>()).into()),
            operation: Some(Cow::Borrowed(operation)),
            request_uri: Some(
                format!(
                    "{} /{bucket}/{} HTTP/1.1",
                    if is_get { "GET" } else { "PUT" },
                    crate::render::encode_key(&key)
                )
                .into(),
            ),
            key: Some(key.into()),
            http_status: Some(status),
            error_code: error.map(Cow::Borrowed),
            bytes_sent: (is_get && status == 200).then_some(size),
            object_size: Some(size),
            total_time_ms: Some(rng.random_range(1..2_000)),
            turn_around_time_ms: Some(rng.random_range(1..100)),
            referer: None,
            user_agent: Some(Cow::Borrowed(USER_AGENTS[rng.random_range(0..USER_AGENTS.len())])),
            version_id: None,
            host_id: Some(
                format!(
                    "{:x}{:x}{:x}=",
                    rng.random::<u64>(),
                    rng.random::<u64>(),
                    rng.random::<u64>()
                )
                .into(),
            ),
            signature_version: Some(Cow::Borrowed("SigV4")),
            cipher_suite: Some(Cow::Borrowed("ECDHE-RSA-AES128-GCM-SHA256")),
            authentication_type: Some(Cow::Borrowed("AuthHeader")),
            host_header: Some(format!("{bucket}.s3.eu-west-1.amazonaws.com").into()),
            tls_version: Some(Cow::Borrowed("TLSv1.2")),
            access_point_arn: None,
            acl_required: (fields >= 26).then_some(false),
            source_region: (fields >= 27).then_some(Cow::Borrowed("eu-west-1")),
            extra_fields: None,
            bucket: Some(bucket.into()),
        };
        if operation.starts_with("S3.") {
            // Lifecycle operations are made by S3 itself: no request line, agent or TLS.
            r.remote_ip = None;
            r.requester = Some(Cow::Borrowed("AmazonS3"));
            r.request_uri = None;
            r.http_status = None;
            r.user_agent = None;
            r.signature_version = None;
            r.cipher_suite = None;
            r.authentication_type = None;
            r.tls_version = None;
        }
        if self.rng.random_bool(self.config.quirk_rate) {
            self.quirk(&mut r, fields);
        }
        r
    }

    fn quirk(&mut self, r: &mut AccessLogRecord<'static>, fields: usize) {
        match self.rng.random_range(0..6) {
            0 => r.user_agent = Some(Cow::Borrowed("\"Mozilla/5.0 (compatible; scanner)\"")),
            1 => {
                let uri = r.request_uri.take().unwrap_or_default();
                r.request_uri =
                    Some(format!("{uri}?response-content-disposition=attachment;filename=\"report 2024.csv\"").into());
            }
            2 => r.referer = Some(Cow::Borrowed("https://example.com/search?q=\"select * from x\"")),
            3 => {
                r.request_uri = Some(Cow::Borrowed("GET /\"><script>alert(1)</script> HTTP/1.1"));
                r.http_status = Some(400);
                r.error_code = Some(Cow::Borrowed("InvalidURI"));
            }
            4 => {
                r.http_status = None;
                r.request_uri = None;
            }
            _ if fields == 27 => r.extra_fields = Some(Cow::Borrowed("x-future-field \"v\"")),
            _ => r.user_agent = Some(Cow::Borrowed("curl/8.0 \"quoted\" agent")),
        }
    }

    fn write_malformed(&mut self, out: &mut Vec<u8>) {
        let mut good = Vec::new();
        let mut record = self.record(27);
        record.extra_fields = None;
        write_line(&record, 27, &mut good);
        match self.rng.random_range(0..4) {
            0 => {
                // Truncated in the middle of the request URI.
                let cut = good.iter().position(|&b| b == b'"').map_or(good.len() / 2, |q| q + 8);
                good.truncate(cut.min(good.len() - 1));
                good.push(b'\n');
                out.extend_from_slice(&good);
            }
            1 => out.extend_from_slice(b"<html><body>503 Service Unavailable</body></html>\n"),
            2 => {
                let text = String::from_utf8_lossy(&good).replacen("+0000]", "+0000", 1);
                let text = text.replacen(" [", " ", 1);
                out.extend_from_slice(text.replacen(":", "x", 1).as_bytes());
            }
            _ => {
                // An access-control value outside its domain.
                let text = String::from_utf8_lossy(&good).replacen(" - eu-west-1", " No eu-west-1", 1);
                out.extend_from_slice(text.as_bytes());
            }
        }
    }
}

/// A corpus of at least `bytes` bytes generated from `config`.
pub fn corpus(config: SynthConfig, bytes: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes + 1024);
    Synth::new(config).fill(&mut out, bytes);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lines::parse_lines;

    #[test]
    fn generated_lines_parse_and_malformed_lines_are_rejected() {
        let config = SynthConfig {
            quirk_rate: 0.3,
            malformed_rate: 0.05,
            ..SynthConfig::default()
        };
        let mut synth = Synth::new(config.clone());
        let mut out = Vec::new();
        synth.fill(&mut out, 2_000_000);
        let (mut ok, mut rejected) = (0u64, 0u64);
        for (_, _, parsed) in parse_lines(&out) {
            match parsed {
                Ok(_) => ok += 1,
                Err(_) => rejected += 1,
            }
        }
        assert_eq!(ok + rejected, synth.lines());
        assert_eq!(
            rejected,
            synth.malformed(),
            "every malformed line rejected, no good one"
        );
        assert!(synth.malformed() > 100);
        assert_eq!(
            corpus(config, 10_000),
            corpus(
                SynthConfig {
                    quirk_rate: 0.3,
                    malformed_rate: 0.05,
                    ..SynthConfig::default()
                },
                10_000
            )
        );
    }
}
