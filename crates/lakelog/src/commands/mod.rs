//! One module per subcommand.

pub mod checkpoint;
pub mod demo;
pub mod generate;
pub mod ingest;
pub mod optimize;
pub mod parse;
pub mod report;
pub mod send_events;
pub mod serve;
pub mod vacuum;
