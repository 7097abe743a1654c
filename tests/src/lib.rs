//! Harness for lakelog's end-to-end tests against local AWS stand-ins.
//!
//! The stand-in is a [moto](https://docs.getmoto.org/) server on `127.0.0.1`: S3 (with conditional
//! writes), SQS and Kinesis behind one endpoint.
//!
//! * Under `scripts/test`, one server is started by `scripts/standins start` for the whole run and
//!   its address is exported as [`LAKELOG_TEST_ENDPOINT`](ENDPOINT_VAR); every test uses it.
//! * Under a plain `cargo test`, [`StandIn::connect`] starts a moto server of its own on a free
//!   port, through the same `scripts/standins` (moto from `$LAKELOG_CACHE/venv`, which
//!   `scripts/test` installs, or else the `moto_server` on `PATH`). The tests of one test binary
//!   that run at the same time share it; it is killed, by its process id, when the last
//!   [`StandIn`] that uses it is dropped, and it exits by itself if the test process dies first.
//!
//! Tests run in parallel against one server, so each test works in buckets of its own:
//! [`StandIn::create_bucket`] gives every call a new name.
//!
//! ```no_run
//! use aws_sdk_s3::primitives::ByteStream;
//!
//! # async fn example() -> anyhow::Result<()> {
//! let standin = lakelog_tests::StandIn::connect().await?;
//! let bucket = standin.create_bucket("example").await?;
//! standin
//!     .s3()
//!     .put_object()
//!     .bucket(&bucket)
//!     .key("raw/2024-01-01-00-00-00-ABCDEF")
//!     .body(ByteStream::from_static(b"a log line\n"))
//!     .send()
//!     .await?;
//! // deltalake tables on the same server: `standin.storage_options()` and `StandIn::s3_uri`.
//! # Ok(())
//! # }
//! ```

mod athena;
mod duckdb;
pub mod faults;
mod kinesis;
pub mod maintenance;
pub mod runtime_api;
mod standin;

pub use athena::{TEMPLATE_GAME_EVENTS, WHOLE_RANGE, athena_query, in_duckdb};
pub use duckdb::{
    SessionDay, assert_glue_views_mirror, assert_views_mirror, duckdb, duckdb_sessions_are_the_report, iceberg_compare,
    python, view_difference,
};
pub use kinesis::{StreamRecord, level_ups, read_stream, unpacked};
pub use standin::{ACCESS_KEY_ID, ENDPOINT_VAR, REGION, SECRET_ACCESS_KEY, StandIn, unique_name};

/// The `p` quantile (0 to 1) of `sorted`, by nearest rank: the value at `(len - 1) * p`, rounded;
/// `None` when there is none. The examples' percentiles.
pub fn percentile<T: Copy>(sorted: &[T], p: f64) -> Option<T> {
    let last = sorted.len().checked_sub(1)?;
    sorted.get(((last as f64 * p).round() as usize).min(last)).copied()
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn a_percentile_is_the_nearest_rank() {
        let sorted = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
        assert_eq!(percentile(&sorted, 0.5), Some(6), "rank 4.5 rounds to 5");
        assert_eq!(percentile(&sorted, 0.99), Some(10));
        assert_eq!(percentile(&sorted, 0.0), Some(1));
        assert_eq!(percentile(&[7.5], 0.95), Some(7.5));
        assert_eq!(percentile::<f64>(&[], 0.5), None);
    }
}
