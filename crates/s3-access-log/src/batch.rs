//! Arrow batches with exactly the `access_logs` and `access_log_rejects` schemas.

use std::borrow::Cow;
use std::mem::MaybeUninit;
use std::sync::{Arc, LazyLock};

use arrow::array::{
    ArrayRef, BooleanBuilder, Int64Builder, PrimitiveArray, StringArray, StringBuilder, TimestampMicrosecondBuilder,
};
use arrow::buffer::{BooleanBuffer, Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow::datatypes::{
    ArrowPrimitiveType, DataType, Date32Type, Field as ArrowField, Int32Type, Int64Type, Schema, SchemaRef, TimeUnit,
    TimestampMicrosecondType,
};
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;

use crate::field::Field;
use crate::lines::LogLine;
use crate::record::{AccessLogRecord, ParsedLine, Typed};
use crate::time::date_of;

/// The timezone of every timestamp column: Delta's `timestamp` type is UTC.
pub const UTC: &str = "UTC";

/// Rows per `access_logs` batch, for writers that choose: small enough that the columns being
/// filled stay in a core's caches (`examples/profile_parse.rs` compares sizes), large enough that what each batch costs downstream (a Parquet
/// write call) stays small.
pub const BATCH_ROWS: usize = 2048;

/// The partition column of `access_logs`.
pub const PARTITION_COLUMN: &str = "request_date";

fn timestamp() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some(UTC.into()))
}

fn string(name: &str) -> ArrowField {
    ArrowField::new(name, DataType::Utf8, true)
}

fn long(name: &str) -> ArrowField {
    ArrowField::new(name, DataType::Int64, true)
}

static ACCESS_LOGS: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        string("bucket_owner"),
        string("bucket"),
        ArrowField::new("request_time", timestamp(), false),
        string("remote_ip"),
        string("requester"),
        string("request_id"),
        string("operation"),
        string("key"),
        string("request_uri"),
        ArrowField::new("http_status", DataType::Int32, true),
        string("error_code"),
        long("bytes_sent"),
        long("object_size"),
        long("total_time_ms"),
        long("turn_around_time_ms"),
        string("referer"),
        string("user_agent"),
        string("version_id"),
        string("host_id"),
        string("signature_version"),
        string("cipher_suite"),
        string("authentication_type"),
        string("host_header"),
        string("tls_version"),
        string("access_point_arn"),
        ArrowField::new("acl_required", DataType::Boolean, true),
        string("source_region"),
        string("extra_fields"),
        ArrowField::new(PARTITION_COLUMN, DataType::Date32, false),
        ArrowField::new("log_object", DataType::Utf8, false),
        ArrowField::new("log_line", DataType::Int64, false),
        ArrowField::new("ingested_at", timestamp(), false),
    ]))
});

static REJECTS: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        ArrowField::new("log_object", DataType::Utf8, false),
        ArrowField::new("log_line", DataType::Int64, false),
        ArrowField::new("line", DataType::Utf8, false),
        ArrowField::new("reason", DataType::Utf8, false),
        ArrowField::new("ingested_at", timestamp(), false),
    ]))
});

/// Columns of `access_logs` nearly every row has a value of its own in, whose Parquet dictionary
/// would be all the values again: writers leave them plain.
pub const ACCESS_LOGS_UNIQUE_COLUMNS: [&str; 3] = ["request_id", "host_id", "log_line"];

/// Columns of `access_log_rejects` nearly every row has a value of its own in (see
/// [`ACCESS_LOGS_UNIQUE_COLUMNS`]).
pub const REJECTS_UNIQUE_COLUMNS: [&str; 2] = ["line", "log_line"];

/// The Arrow schema of the `access_logs` table.
pub fn access_logs_schema() -> SchemaRef {
    ACCESS_LOGS.clone()
}

/// The Arrow schema of the `access_log_rejects` table.
pub fn rejects_schema() -> SchemaRef {
    REJECTS.clone()
}

/// Which of a row's nullable columns have a value: bit `i` for the `i`-th nullable column in
/// schema order. One word per row instead of a byte pushed per column; each column's validity
/// bits are gathered from the words when the batch is finished.
#[derive(Debug, Default)]
struct RowMask {
    bits: u32,
    next: u32,
}

impl RowMask {
    /// Records whether the next nullable column has a value.
    #[inline(always)]
    fn set(&mut self, valid: bool) {
        self.bits |= u32::from(valid) << self.next;
        self.next += 1;
    }
}

/// The validity of the nullable column of bit `bit`, from the rows' masks; none when every row
/// has a value.
fn nulls_of(masks: &[u32], bit: u32) -> Option<NullBuffer> {
    let nulls = NullBuffer::new(BooleanBuffer::collect_bool(masks.len(), |row| {
        masks[row] >> bit & 1 != 0
    }));
    (nulls.null_count() > 0).then_some(nulls)
}

/// A column of numbers being built, without the call per value of arrow's `PrimitiveBuilder`;
/// its validity is the rows' masks'.
#[derive(Debug)]
struct Numbers<T: ArrowPrimitiveType> {
    values: Vec<T::Native>,
}

impl<T: ArrowPrimitiveType> Numbers<T> {
    fn with_capacity(rows: usize) -> Self {
        Self {
            values: Vec::with_capacity(rows),
        }
    }

    /// Appends a value of a column without nulls.
    #[inline(always)]
    fn push(&mut self, value: T::Native) {
        self.values.push(value);
    }

    /// Appends a value of a nullable column, and whether it has one to `mask`.
    #[inline(always)]
    fn push_option(&mut self, value: Option<T::Native>, mask: &mut RowMask) {
        mask.set(value.is_some());
        self.values.push(value.unwrap_or_default());
    }

    fn finish(self, nulls: Option<NullBuffer>) -> PrimitiveArray<T> {
        PrimitiveArray::new(ScalarBuffer::from(self.values), nulls)
    }
}

/// A `Utf8` column being built. It does what arrow's `StringBuilder` does for each value, without
/// its per-value checks: the offsets are checked once per batch, and the values are known to be
/// UTF-8 because only `&str` goes in. Its validity is the rows' masks'.
#[derive(Debug)]
struct TextColumn {
    values: Vec<u8>,
    /// Where each value ends in `values`, after a leading 0. Wrapped past `i32::MAX`, which
    /// `finish` then reports.
    offsets: Vec<i32>,
}

impl TextColumn {
    fn with_capacity(rows: usize, bytes: usize) -> Self {
        let mut offsets = Vec::with_capacity(rows + 1);
        offsets.push(0);
        Self {
            values: Vec::with_capacity(bytes),
            offsets,
        }
    }

    /// Appends a value (nothing for a null), and whether there is one to `mask`.
    #[inline(always)]
    fn push(&mut self, value: Option<&str>, mask: &mut RowMask) {
        mask.set(value.is_some());
        if let Some(value) = value {
            self.append_bytes(value.as_bytes());
        }
        self.offsets.push(self.values.len() as i32);
    }

    /// Appends `bytes` to the values. Inlined into each column's `push`, so the branches on the
    /// length are each column's own, which the CPU predicts well (a column's values are mostly of
    /// one length class), unlike those of the one `memcpy` all columns would share.
    #[inline(always)]
    fn append_bytes(&mut self, bytes: &[u8]) {
        let n = bytes.len();
        if n > SHORT {
            self.values.extend_from_slice(bytes);
            return;
        }
        self.values.reserve(SHORT);
        copy_short(&mut self.values.spare_capacity_mut()[..SHORT], bytes);
        // SAFETY: `copy_short` initialised the first `n` bytes of the spare capacity, which
        // `reserve` made at least `SHORT` bytes long.
        unsafe { self.values.set_len(self.values.len() + n) };
    }

    /// Appends `value` `rows` times.
    fn push_n(&mut self, value: &str, rows: usize) {
        let start = self.values.len();
        let total = value.len() * rows;
        self.values.reserve(total);
        if rows > 0 {
            self.values.extend_from_slice(value.as_bytes());
        }
        // Doubling what is there: a handful of large copies instead of one per row.
        while self.values.len() - start < total {
            let have = self.values.len() - start;
            self.values.extend_from_within(start..start + have.min(total - have));
        }
        self.offsets
            .extend((1..=rows).map(|row| (start + row * value.len()) as i32));
    }

    /// The column, with `nulls` for its validity (as many as its values).
    fn finish(self, nulls: Option<NullBuffer>) -> Result<StringArray, ArrowError> {
        if i32::try_from(self.values.len()).is_err() {
            return Err(ArrowError::InvalidArgumentError(format!(
                "{} bytes of text in one column of a batch, more than the 2 GiB a Utf8 column holds",
                self.values.len()
            )));
        }
        let offsets = ScalarBuffer::from(self.offsets);
        let values = Buffer::from_vec(self.values);
        if cfg!(debug_assertions) || nulls.as_ref().is_some_and(|n| n.len() + 1 != offsets.len()) {
            return StringArray::try_new(OffsetBuffer::new(offsets), values, nulls);
        }
        // SAFETY: the offsets start at 0 and never decrease, since every value appends bytes and
        // then its end, and none of them wrapped, since the values fit in `i32`; `values` is the
        // concatenation of `&str`s, cut at their ends only, so each value is UTF-8; there are as
        // many validity bits as values (checked above). Debug builds check all of it with
        // `try_new` above.
        Ok(unsafe { StringArray::new_unchecked(OffsetBuffer::new_unchecked(offsets), values, nulls) })
    }
}

/// Values up to this long are copied by [`copy_short`].
const SHORT: usize = 128;

/// Copies `src` (at most [`SHORT`] bytes) to the start of `dst` (exactly `SHORT` bytes) with at
/// most two fixed-size copies, overlapping when `src` is shorter than both together.
#[inline(always)]
fn copy_short(dst: &mut [MaybeUninit<u8>], src: &[u8]) {
    let n = src.len();
    if n > 64 {
        dst[..64].write_copy_of_slice(&src[..64]);
        dst[n - 64..n].write_copy_of_slice(&src[n - 64..]);
    } else if n >= 16 {
        if n >= 32 {
            dst[..32].write_copy_of_slice(&src[..32]);
            dst[n - 32..n].write_copy_of_slice(&src[n - 32..]);
        } else {
            dst[..16].write_copy_of_slice(&src[..16]);
            dst[n - 16..n].write_copy_of_slice(&src[n - 16..]);
        }
    } else if n >= 8 {
        dst[..8].write_copy_of_slice(&src[..8]);
        dst[n - 8..n].write_copy_of_slice(&src[n - 8..]);
    } else if n >= 4 {
        dst[..4].write_copy_of_slice(&src[..4]);
        dst[n - 4..n].write_copy_of_slice(&src[n - 4..]);
    } else if n > 0 {
        dst[0].write(src[0]);
        dst[n / 2].write(src[n / 2]);
        dst[n - 1].write(src[n - 1]);
    }
}

/// The network of an IP address, which identifies no one requester as the address may: an IPv4
/// address to its /24 (`192.0.2.0`), an IPv6 one to its /48 (`2001:db8:85a3::`). `None` for text
/// that is not an address, so that nothing identifying is kept by mistake.
pub fn truncate_ip(text: &str) -> Option<String> {
    match text.trim().parse::<std::net::IpAddr>().ok()? {
        std::net::IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            Some(std::net::Ipv4Addr::new(a, b, c, 0).to_string())
        }
        std::net::IpAddr::V6(v6) => {
            let s = v6.segments();
            Some(std::net::Ipv6Addr::new(s[0], s[1], s[2], 0, 0, 0, 0, 0).to_string())
        }
    }
}

/// `text` with every IP address in it (a run of hex digits, `.` and `:` that parses as one)
/// replaced by its network ([`truncate_ip`]): a line that could not be parsed keeps no requester's
/// address wherever the address stood. One pass over the text.
pub fn truncate_ips_in(text: &str) -> String {
    let is_address_char = |c: char| c.is_ascii_hexdigit() || c == '.' || c == ':';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(is_address_char) {
        out.push_str(&rest[..start]);
        let run = &rest[start..];
        let end = run.find(|c: char| !is_address_char(c)).unwrap_or(run.len());
        let token = &run[..end];
        match truncate_ip(token).filter(|_| token.contains(['.', ':'])) {
            Some(network) => out.push_str(&network),
            None => out.push_str(token),
        }
        rest = &run[end..];
    }
    out.push_str(rest);
    out
}

/// Appends records, column by column, into an `access_logs` batch.
#[derive(Debug)]
pub struct AccessLogBatchBuilder {
    ingested_at: i64,
    /// Whether `remote_ip` is kept to its network only ([`truncate_ip`]).
    truncate_ips: bool,
    bucket_owner: TextColumn,
    bucket: TextColumn,
    request_time: Numbers<TimestampMicrosecondType>,
    remote_ip: TextColumn,
    requester: TextColumn,
    request_id: TextColumn,
    operation: TextColumn,
    key: TextColumn,
    request_uri: TextColumn,
    http_status: Numbers<Int32Type>,
    error_code: TextColumn,
    bytes_sent: Numbers<Int64Type>,
    object_size: Numbers<Int64Type>,
    total_time_ms: Numbers<Int64Type>,
    turn_around_time_ms: Numbers<Int64Type>,
    referer: TextColumn,
    user_agent: TextColumn,
    version_id: TextColumn,
    host_id: TextColumn,
    signature_version: TextColumn,
    cipher_suite: TextColumn,
    authentication_type: TextColumn,
    host_header: TextColumn,
    tls_version: TextColumn,
    access_point_arn: TextColumn,
    acl_required: BooleanBuilder,
    source_region: TextColumn,
    extra_fields: TextColumn,
    request_date: Numbers<Date32Type>,
    /// The `log_object` column as runs of one value: a builder seldom sees more than one object.
    log_objects: Vec<(String, usize)>,
    log_line: Numbers<Int64Type>,
    /// Per row, which nullable columns have a value ([`RowMask`]).
    masks: Vec<u32>,
    rows: usize,
    /// The rows the builder was made for.
    capacity: usize,
}

#[inline(always)]
fn put(column: &mut TextColumn, value: Option<Cow<'_, str>>, mask: &mut RowMask) {
    column.push(value.as_deref(), mask);
}

impl AccessLogBatchBuilder {
    /// A builder whose rows all get `ingested_at` (microseconds since the epoch, UTC).
    pub fn new(ingested_at: i64) -> Self {
        Self::with_capacity(ingested_at, 1024)
    }

    /// A builder with room for `rows` rows before it reallocates.
    pub fn with_capacity(ingested_at: i64, rows: usize) -> Self {
        Self::sized(ingested_at, rows, None)
    }

    /// The same builder, keeping of each `remote_ip` only its network when `on` ([`truncate_ip`]).
    pub fn with_truncated_ips(mut self, on: bool) -> Self {
        self.truncate_ips = on;
        self
    }

    /// Builders with room for `rows` rows, and for as many bytes in each text column as `like` holds
    /// or a guess per row, whichever is more.
    fn sized(ingested_at: i64, rows: usize, like: Option<&Self>) -> Self {
        let s = |guess: usize, column: fn(&Self) -> &TextColumn| {
            let used = like.map_or(0, |like| column(like).values.len());
            TextColumn::with_capacity(rows, used.max(rows * guess))
        };
        let long = || Numbers::with_capacity(rows);
        Self {
            ingested_at,
            truncate_ips: like.is_some_and(|like| like.truncate_ips),
            bucket_owner: s(64, |b| &b.bucket_owner),
            bucket: s(16, |b| &b.bucket),
            request_time: Numbers::with_capacity(rows),
            remote_ip: s(16, |b| &b.remote_ip),
            requester: s(64, |b| &b.requester),
            request_id: s(16, |b| &b.request_id),
            operation: s(16, |b| &b.operation),
            key: s(48, |b| &b.key),
            request_uri: s(64, |b| &b.request_uri),
            http_status: Numbers::with_capacity(rows),
            error_code: s(16, |b| &b.error_code),
            bytes_sent: long(),
            object_size: long(),
            total_time_ms: long(),
            turn_around_time_ms: long(),
            referer: s(16, |b| &b.referer),
            user_agent: s(48, |b| &b.user_agent),
            version_id: s(16, |b| &b.version_id),
            host_id: s(76, |b| &b.host_id),
            signature_version: s(16, |b| &b.signature_version),
            cipher_suite: s(28, |b| &b.cipher_suite),
            authentication_type: s(16, |b| &b.authentication_type),
            host_header: s(40, |b| &b.host_header),
            tls_version: s(16, |b| &b.tls_version),
            access_point_arn: s(16, |b| &b.access_point_arn),
            acl_required: BooleanBuilder::with_capacity(rows),
            source_region: s(16, |b| &b.source_region),
            extra_fields: s(0, |b| &b.extra_fields),
            request_date: Numbers::with_capacity(rows),
            log_objects: Vec::new(),
            log_line: long(),
            masks: Vec::with_capacity(rows),
            rows: 0,
            capacity: rows,
        }
    }

    /// Appends the row of a line, [`ParsedLine::parse`]d, that is line `log_line` (1-based) of
    /// `log_object`. Its text goes from the line into the columns, without a record in between.
    #[inline]
    pub fn append(&mut self, line: &ParsedLine<'_>, log_object: &str, log_line: i64) {
        let f = line.fields();
        let row = (line.typed(), line.key(), f.extra_text());
        if f.is_utf8() {
            // SAFETY: the line is UTF-8.
            self.append_with(row, log_object, log_line, |field| unsafe { f.utf8_text(field) })
        } else {
            self.append_with(row, log_object, log_line, |field| f.text(field))
        }
    }

    /// Appends the row of a typed record that is line `log_line` (1-based) of `log_object`.
    pub fn append_record(&mut self, record: &AccessLogRecord<'_>, log_object: &str, log_line: i64) {
        let typed = Typed {
            request_time: record.request_time,
            http_status: record.http_status,
            bytes_sent: record.bytes_sent,
            object_size: record.object_size,
            total_time_ms: record.total_time_ms,
            turn_around_time_ms: record.turn_around_time_ms,
            acl_required: record.acl_required,
        };
        let row = (
            &typed,
            record.key.as_deref().map(Cow::Borrowed),
            record.extra_fields.as_deref().map(Cow::Borrowed),
        );
        self.append_with(row, log_object, log_line, |field| record.text(field).map(Cow::Borrowed))
    }

    /// Appends the row of a line of either form, [`LogLine::parse`]d.
    #[inline]
    pub fn append_line(&mut self, line: &LogLine<'_>, log_object: &str, log_line: i64) {
        match line {
            LogLine::Text(line) => self.append(line, log_object, log_line),
            LogLine::Json(record) => self.append_record(record, log_object, log_line),
        }
    }

    /// Appends a row: its typed fields, decoded key and extra fields, and its text fields through
    /// `text`.
    #[inline(always)]
    fn append_with<'a>(
        &mut self,
        (t, key, extra): (&Typed, Option<Cow<'a, str>>, Option<Cow<'a, str>>),
        log_object: &str,
        log_line: i64,
        text: impl Fn(Field) -> Option<Cow<'a, str>>,
    ) {
        // The nullable columns in schema order: their bits in the row's mask.
        let m = &mut RowMask::default();
        put(&mut self.bucket_owner, text(Field::BucketOwner), m);
        put(&mut self.bucket, text(Field::Bucket), m);
        self.request_time.push(t.request_time);
        let remote_ip = text(Field::RemoteIp);
        let remote_ip = if self.truncate_ips {
            remote_ip.and_then(|ip| truncate_ip(&ip)).map(Cow::Owned)
        } else {
            remote_ip
        };
        put(&mut self.remote_ip, remote_ip, m);
        put(&mut self.requester, text(Field::Requester), m);
        put(&mut self.request_id, text(Field::RequestId), m);
        put(&mut self.operation, text(Field::Operation), m);
        put(&mut self.key, key, m);
        put(&mut self.request_uri, text(Field::RequestUri), m);
        self.http_status.push_option(t.http_status, m);
        put(&mut self.error_code, text(Field::ErrorCode), m);
        self.bytes_sent.push_option(t.bytes_sent, m);
        self.object_size.push_option(t.object_size, m);
        self.total_time_ms.push_option(t.total_time_ms, m);
        self.turn_around_time_ms.push_option(t.turn_around_time_ms, m);
        put(&mut self.referer, text(Field::Referer), m);
        put(&mut self.user_agent, text(Field::UserAgent), m);
        put(&mut self.version_id, text(Field::VersionId), m);
        put(&mut self.host_id, text(Field::HostId), m);
        put(&mut self.signature_version, text(Field::SignatureVersion), m);
        put(&mut self.cipher_suite, text(Field::CipherSuite), m);
        put(&mut self.authentication_type, text(Field::AuthenticationType), m);
        put(&mut self.host_header, text(Field::HostHeader), m);
        put(&mut self.tls_version, text(Field::TlsVersion), m);
        put(&mut self.access_point_arn, text(Field::AccessPointArn), m);
        self.acl_required.append_option(t.acl_required);
        put(&mut self.source_region, text(Field::SourceRegion), m);
        put(&mut self.extra_fields, extra, m);
        self.masks.push(m.bits);
        self.request_date.push(date_of(t.request_time));
        match self.log_objects.last_mut() {
            Some((last, rows)) if last == log_object => *rows += 1,
            _ => self.log_objects.push((log_object.to_owned(), 1)),
        }
        self.log_line.push(log_line);
        self.rows += 1;
    }

    /// Rows appended since the last `finish`.
    pub fn len(&self) -> usize {
        self.rows
    }

    /// Whether no row was appended since the last `finish`.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// The rows appended so far as one batch; the builder is empty again afterwards.
    pub fn finish(&mut self) -> Result<RecordBatch, ArrowError> {
        // Finishing an Arrow builder leaves it without capacity: the next batch gets builders as
        // large as this one's instead of growing them from nothing again.
        let rows = self.rows;
        let next = Self::sized(self.ingested_at, rows.max(self.capacity), Some(self));
        let mut done = std::mem::replace(self, next);
        let mut ingested_at = TimestampMicrosecondBuilder::with_capacity(rows).with_timezone(UTC);
        ingested_at.append_value_n(done.ingested_at, rows);
        let bytes = done.log_objects.iter().map(|(object, rows)| object.len() * rows).sum();
        let mut log_object = TextColumn::with_capacity(rows, bytes);
        for (object, rows) in &done.log_objects {
            log_object.push_n(object, *rows);
        }
        // The nullable columns' validity, in the order `append` gave them their bits.
        let masks = std::mem::take(&mut done.masks);
        let mut bit = 0;
        let mut nulls = || {
            bit += 1;
            nulls_of(&masks, bit - 1)
        };
        let columns: Vec<ArrayRef> = vec![
            Arc::new(done.bucket_owner.finish(nulls())?),
            Arc::new(done.bucket.finish(nulls())?),
            Arc::new(done.request_time.finish(None).with_timezone(UTC)),
            Arc::new(done.remote_ip.finish(nulls())?),
            Arc::new(done.requester.finish(nulls())?),
            Arc::new(done.request_id.finish(nulls())?),
            Arc::new(done.operation.finish(nulls())?),
            Arc::new(done.key.finish(nulls())?),
            Arc::new(done.request_uri.finish(nulls())?),
            Arc::new(done.http_status.finish(nulls())),
            Arc::new(done.error_code.finish(nulls())?),
            Arc::new(done.bytes_sent.finish(nulls())),
            Arc::new(done.object_size.finish(nulls())),
            Arc::new(done.total_time_ms.finish(nulls())),
            Arc::new(done.turn_around_time_ms.finish(nulls())),
            Arc::new(done.referer.finish(nulls())?),
            Arc::new(done.user_agent.finish(nulls())?),
            Arc::new(done.version_id.finish(nulls())?),
            Arc::new(done.host_id.finish(nulls())?),
            Arc::new(done.signature_version.finish(nulls())?),
            Arc::new(done.cipher_suite.finish(nulls())?),
            Arc::new(done.authentication_type.finish(nulls())?),
            Arc::new(done.host_header.finish(nulls())?),
            Arc::new(done.tls_version.finish(nulls())?),
            Arc::new(done.access_point_arn.finish(nulls())?),
            Arc::new(done.acl_required.finish()),
            Arc::new(done.source_region.finish(nulls())?),
            Arc::new(done.extra_fields.finish(nulls())?),
            Arc::new(done.request_date.finish(None)),
            Arc::new(log_object.finish(None)?),
            Arc::new(done.log_line.finish(None)),
            Arc::new(ingested_at.finish()),
        ];
        RecordBatch::try_new(access_logs_schema(), columns)
    }
}

/// Appends lines that could not be parsed into an `access_log_rejects` batch.
#[derive(Debug)]
pub struct RejectsBatchBuilder {
    ingested_at: i64,
    /// Whether the IP addresses in a kept line are kept to their network only ([`truncate_ip`]).
    truncate_ips: bool,
    log_object: StringBuilder,
    log_line: Int64Builder,
    line: StringBuilder,
    reason: StringBuilder,
}

impl RejectsBatchBuilder {
    /// A builder whose rows all get `ingested_at` (microseconds since the epoch, UTC).
    pub fn new(ingested_at: i64) -> Self {
        Self {
            ingested_at,
            truncate_ips: false,
            log_object: StringBuilder::new(),
            log_line: Int64Builder::new(),
            line: StringBuilder::new(),
            reason: StringBuilder::new(),
        }
    }

    /// The same builder, keeping of each IP address in a rejected line only its network when
    /// `on` ([`truncate_ip`]), as the `access_logs` rows keep `remote_ip`.
    pub fn with_truncated_ips(mut self, on: bool) -> Self {
        self.truncate_ips = on;
        self
    }

    /// Records that line `log_line` of `log_object` was rejected for `reason`. The line is kept as
    /// text, with bytes that are not UTF-8 replaced (and its addresses truncated, when asked).
    pub fn append(&mut self, log_object: &str, log_line: i64, line: &[u8], reason: &str) {
        self.log_object.append_value(log_object);
        self.log_line.append_value(log_line);
        let text = String::from_utf8_lossy(line);
        if self.truncate_ips {
            self.line.append_value(truncate_ips_in(&text));
        } else {
            self.line.append_value(text);
        }
        self.reason.append_value(reason);
    }

    /// Rows appended since the last `finish`.
    pub fn len(&self) -> usize {
        self.log_line.values_slice().len()
    }

    /// Whether no row was appended since the last `finish`.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The rows appended so far as one batch; the builder is empty again afterwards.
    pub fn finish(&mut self) -> Result<RecordBatch, ArrowError> {
        let rows = self.len();
        let mut ingested_at = TimestampMicrosecondBuilder::with_capacity(rows).with_timezone(UTC);
        ingested_at.append_value_n(self.ingested_at, rows);
        let columns: Vec<ArrayRef> = vec![
            Arc::new(self.log_object.finish()),
            Arc::new(self.log_line.finish()),
            Arc::new(self.line.finish()),
            Arc::new(self.reason.finish()),
            Arc::new(ingested_at.finish()),
        ];
        RecordBatch::try_new(rejects_schema(), columns)
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::{Date32Type, Int32Type, Int64Type, TimestampMicrosecondType};

    use super::*;

    const LINE: &[u8] = b"owner bkt [06/Feb/2019:00:00:38 +0000] 192.0.2.3 req ID REST.GET.OBJECT a%2Fb \
        \"GET /bkt/a/b HTTP/1.1\" 200 - 113 2000 7 - \"-\" \"ua\" - host SigV4 c AuthHeader h TLSv1.2 - -";

    #[test]
    fn batch_has_the_schema_and_the_values() {
        let record = ParsedLine::parse(LINE).unwrap();
        let mut b = AccessLogBatchBuilder::new(42);
        b.append(&record, "s3://raw/log1", 7);
        b.append(&record, "s3://raw/log1", 8);
        assert_eq!(b.len(), 2);
        let batch = b.finish().unwrap();
        assert!(b.is_empty());
        assert_eq!(batch.schema(), access_logs_schema());
        assert_eq!(batch.num_rows(), 2);
        let col = |name: &str| batch.column_by_name(name).unwrap().clone();
        assert_eq!(col("key").as_string::<i32>().value(0), "a/b");
        assert_eq!(col("bucket").as_string::<i32>().value(1), "bkt");
        assert!(col("error_code").is_null(0));
        assert_eq!(col("http_status").as_primitive::<Int32Type>().value(0), 200);
        assert_eq!(col("object_size").as_primitive::<Int64Type>().value(0), 2000);
        assert!(col("turn_around_time_ms").is_null(1));
        assert_eq!(
            col("request_time").as_primitive::<TimestampMicrosecondType>().value(0),
            1_549_411_238_000_000
        );
        assert_eq!(col("request_date").as_primitive::<Date32Type>().value(0), 17_933);
        assert!(!col("acl_required").as_boolean().value(0));
        assert!(col("source_region").is_null(0));
        assert_eq!(col("log_line").as_primitive::<Int64Type>().values(), &[7, 8]);
        assert_eq!(
            col("ingested_at").as_primitive::<TimestampMicrosecondType>().value(1),
            42
        );
        // The builder is reusable after finish.
        b.append(&record, "s3://raw/log2", 1);
        assert_eq!(b.finish().unwrap().num_rows(), 1);
    }

    #[test]
    fn truncated_ips_keep_the_network_only() {
        assert_eq!(truncate_ip("192.0.2.3").as_deref(), Some("192.0.2.0"));
        assert_eq!(
            truncate_ip("2001:db8:85a3:8d3:1319:8a2e:370:7348").as_deref(),
            Some("2001:db8:85a3::")
        );
        assert_eq!(truncate_ip("::ffff:192.0.2.3").as_deref(), Some("::"));
        assert_eq!(truncate_ip("not an address"), None);
        let record = ParsedLine::parse(LINE).unwrap();
        let mut b = AccessLogBatchBuilder::new(42).with_truncated_ips(true);
        b.append(&record, "s3://raw/log1", 7);
        let batch = b.finish().unwrap();
        let ips = batch
            .column_by_name("remote_ip")
            .unwrap()
            .as_string::<i32>()
            .value(0)
            .to_owned();
        assert_eq!(ips, "192.0.2.0");
        // The next batch of the builder truncates too.
        b.append(&record, "s3://raw/log1", 8);
        let next = b.finish().unwrap();
        assert_eq!(
            next.column_by_name("remote_ip").unwrap().as_string::<i32>().value(0),
            "192.0.2.0"
        );
    }

    #[test]
    fn text_columns_hold_values_of_every_length() {
        let text: String = ('a'..='z')
            .chain('A'..='Z')
            .chain('0'..='9')
            .cycle()
            .take(200)
            .collect();
        let values: Vec<Option<&str>> = (0..=150)
            .map(|n| (n % 7 != 3).then(|| &text[n % 13..n % 13 + n]))
            .chain([Some("caf\u{e9} \u{1F980}"), None, Some("")])
            .collect();
        let mut column = TextColumn::with_capacity(2, 0);
        let mut masks = Vec::new();
        for &value in &values {
            let mut mask = RowMask::default();
            column.push(value, &mut mask);
            masks.push(mask.bits);
        }
        column.push_n("s3://raw/log", 3);
        column.push_n("x", 0);
        masks.extend([1; 3]);
        let array = column.finish(nulls_of(&masks, 0)).unwrap();
        assert_eq!(array.len(), values.len() + 3);
        for (i, value) in values.iter().enumerate() {
            assert_eq!(array.is_valid(i).then(|| array.value(i)), *value, "{i}");
        }
        assert_eq!(array.value(values.len() + 2), "s3://raw/log");
    }

    #[test]
    fn number_columns_keep_values_and_nulls_across_words() {
        let values: Vec<Option<i64>> = (0..200i64).map(|i| (i % 3 != 0).then_some(i * 1_000_003)).collect();
        let mut column = Numbers::<Int64Type>::with_capacity(1);
        // Each value's bit is the second of its row's mask, after another column's.
        let mut masks = Vec::new();
        for (i, &value) in values.iter().enumerate() {
            let mut mask = RowMask::default();
            mask.set(i % 2 == 0);
            column.push_option(value, &mut mask);
            masks.push(mask.bits);
        }
        let array = column.finish(nulls_of(&masks, 1));
        assert_eq!(array.iter().collect::<Vec<_>>(), values);
        assert_eq!(array.null_count(), 67);
        let mut all_valid = Numbers::<Int32Type>::with_capacity(0);
        (0..70).for_each(|i| all_valid.push(i));
        let array = all_valid.finish(nulls_of(&[1; 70], 0));
        assert!(array.nulls().is_none());
        assert_eq!(array.value(69), 69);
    }

    /// Every column of a batch, built straight from the lines, against the same column built with
    /// arrow's builders from each line's [`AccessLogRecord`]: every era, quoting quirks, bytes
    /// that are not UTF-8, rows of several objects, across batches.
    #[test]
    fn batches_hold_what_the_records_of_their_lines_hold() {
        use arrow::array::{Date32Array, Int32Array, StringArray, TimestampMicrosecondArray};
        use fixtures::log_lines::{SynthConfig, corpus};

        use crate::{AccessLogRecord, Lines};

        let mut corpus = corpus(
            SynthConfig {
                quirk_rate: 0.2,
                malformed_rate: 0.01,
                ..Default::default()
            },
            1 << 20,
        );
        // Lines with bytes that are not UTF-8, in a text field and in the key.
        corpus.extend_from_slice(
            &LINE
                .iter()
                .map(|&b| if b == b'u' { 0xFF } else { b })
                .collect::<Vec<_>>(),
        );
        corpus.push(b'\n');
        let key = LINE.windows(5).position(|w| w == b"a%2Fb").unwrap();
        corpus.extend_from_slice(&[&LINE[..key], b"a\xFFb+c", &LINE[key + 5..], b"\n"].concat());
        // A key whose decoded bytes are not UTF-8, in a line that is.
        corpus.extend_from_slice(&[&LINE[..key], b"bad%FF%FEkey+x", &LINE[key + 5..], b"\n"].concat());
        let mut builder = AccessLogBatchBuilder::with_capacity(9, 1000);
        let mut records = Vec::new();
        let mut batches = Vec::new();
        for (number, line) in Lines::new(&corpus) {
            let Ok(parsed) = ParsedLine::parse(line) else {
                assert!(AccessLogRecord::parse(line).is_err());
                continue;
            };
            let object = ["s3://raw/a", "s3://raw/b"][usize::from(number % 3 == 0)];
            builder.append(&parsed, object, number as i64);
            records.push((AccessLogRecord::parse(line).unwrap(), object, number as i64));
            if builder.len() == 1000 {
                batches.push(builder.finish().unwrap());
            }
        }
        batches.push(builder.finish().unwrap());
        let batch = arrow::compute::concat_batches(&access_logs_schema(), &batches).unwrap();
        assert!(records.len() > 1500, "{}", records.len());
        assert!(records.iter().any(|(r, ..)| r.extra_fields.is_some()));

        type R<'r> = &'r (AccessLogRecord<'r>, &'r str, i64);
        let text =
            |get: fn(R<'_>) -> Option<&str>| -> ArrayRef { Arc::new(StringArray::from_iter(records.iter().map(get))) };
        let long = |get: fn(R<'_>) -> Option<i64>| -> ArrayRef {
            Arc::new(arrow::array::Int64Array::from_iter(records.iter().map(get)))
        };
        let utc =
            |values: Vec<i64>| -> ArrayRef { Arc::new(TimestampMicrosecondArray::from(values).with_timezone(UTC)) };
        let expected: Vec<ArrayRef> = vec![
            text(|(r, ..)| r.bucket_owner.as_deref()),
            text(|(r, ..)| r.bucket.as_deref()),
            utc(records.iter().map(|(r, ..)| r.request_time).collect()),
            text(|(r, ..)| r.remote_ip.as_deref()),
            text(|(r, ..)| r.requester.as_deref()),
            text(|(r, ..)| r.request_id.as_deref()),
            text(|(r, ..)| r.operation.as_deref()),
            text(|(r, ..)| r.key.as_deref()),
            text(|(r, ..)| r.request_uri.as_deref()),
            Arc::new(Int32Array::from_iter(records.iter().map(|(r, ..)| r.http_status))),
            text(|(r, ..)| r.error_code.as_deref()),
            long(|(r, ..)| r.bytes_sent),
            long(|(r, ..)| r.object_size),
            long(|(r, ..)| r.total_time_ms),
            long(|(r, ..)| r.turn_around_time_ms),
            text(|(r, ..)| r.referer.as_deref()),
            text(|(r, ..)| r.user_agent.as_deref()),
            text(|(r, ..)| r.version_id.as_deref()),
            text(|(r, ..)| r.host_id.as_deref()),
            text(|(r, ..)| r.signature_version.as_deref()),
            text(|(r, ..)| r.cipher_suite.as_deref()),
            text(|(r, ..)| r.authentication_type.as_deref()),
            text(|(r, ..)| r.host_header.as_deref()),
            text(|(r, ..)| r.tls_version.as_deref()),
            text(|(r, ..)| r.access_point_arn.as_deref()),
            Arc::new(arrow::array::BooleanArray::from_iter(
                records.iter().map(|(r, ..)| r.acl_required),
            )),
            text(|(r, ..)| r.source_region.as_deref()),
            text(|(r, ..)| r.extra_fields.as_deref()),
            Arc::new(Date32Array::from_iter_values(
                records.iter().map(|(r, ..)| r.request_date()),
            )),
            text(|(_, object, _)| Some(object)),
            long(|(.., line)| Some(*line)),
            utc(vec![9; records.len()]),
        ];
        for ((field, column), expected) in batch.schema().fields().iter().zip(batch.columns()).zip(expected) {
            assert_eq!(column.as_ref(), expected.as_ref(), "{}", field.name());
        }
        let keys = batch.column_by_name("key").unwrap().as_string::<i32>();
        assert!(keys.iter().any(|k| k == Some("bad%FF%FEkey+x")));
        let user_agent = batch.column_by_name("user_agent").unwrap().as_string::<i32>();
        assert!(user_agent.iter().any(|ua| ua.is_some_and(|ua| ua.contains('\u{FFFD}'))));
    }

    #[test]
    fn log_object_runs() {
        let record = ParsedLine::parse(LINE).unwrap();
        let mut b = AccessLogBatchBuilder::new(0);
        let objects = [
            "s3://raw/a",
            "s3://raw/a",
            "s3://raw/b",
            "s3://raw/a",
            "s3://raw/a",
            "s3://raw/a",
        ];
        for (line, object) in objects.iter().enumerate() {
            b.append(&record, object, line as i64 + 1);
        }
        let batch = b.finish().unwrap();
        let column = batch.column_by_name("log_object").unwrap().as_string::<i32>().clone();
        assert_eq!(column.iter().collect::<Vec<_>>(), objects.map(Some));
        assert_eq!(column.null_count(), 0);
    }

    #[test]
    fn rejected_lines_keep_only_networks_when_asked() {
        let line = r#"79a5 bucket [06/Feb/2019:00:00:38 +0000] 192.0.2.3 - 3E57 REST.GET {"ip":"2001:db8:85a3::8a2e:370:7334"} 1.2.3 x"#;
        assert_eq!(
            truncate_ips_in(line),
            r#"79a5 bucket [06/Feb/2019:00:00:38 +0000] 192.0.2.0 - 3E57 REST.GET {"ip":"2001:db8:85a3::"} 1.2.3 x"#
        );
        let mut b = RejectsBatchBuilder::new(1).with_truncated_ips(true);
        b.append("o", 1, b"bad 198.51.100.77 line", "reason");
        let batch = b.finish().unwrap();
        assert_eq!(batch.column(2).as_string::<i32>().value(0), "bad 198.51.100.0 line");
    }

    #[test]
    fn rejects_batch() {
        let mut b = RejectsBatchBuilder::new(1);
        b.append("s3://raw/log1", 3, b"garbage \xFF", "line has 2 fields");
        let batch = b.finish().unwrap();
        assert_eq!(batch.schema(), rejects_schema());
        assert_eq!(batch.column(2).as_string::<i32>().value(0), "garbage \u{FFFD}");
        assert_eq!(batch.column(3).as_string::<i32>().value(0), "line has 2 fields");
    }
}
