//! The read side: queries on consistent snapshots of the partition stores
//! ([`query`]), and the HTTP API over them ([`http`]).

pub mod http;
pub mod query;
pub mod reads;
