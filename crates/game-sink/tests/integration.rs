//! The integration tests of `game-sink`, one test binary: each file beside this one is a module of it
//! (every binary links the crate's whole dependency tree, so one links once).

mod erasure;
mod redelivery;
mod sample_batches;
