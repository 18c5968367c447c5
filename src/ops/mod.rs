//! Tools over a data directory's state and log: views as of an earlier
//! time, rebuild a state from the
//! log beside the live one, digest and verify states, swap a rebuilt state
//! in, reset to a checkpoint or the start; in Kafka mode, generations
//! rebuilt beside the live group, and a new generation seeded from a cut.

pub mod asof;
pub mod cut;
pub mod digest;
pub mod generation;
pub mod rebuild;
pub mod requests;
pub mod reset;
pub mod seed;
pub mod serve;
pub mod status;
pub mod swap;
