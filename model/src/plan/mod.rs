//! The planning formulas: each a pure function of typed inputs, checked, with a property test.

pub mod attribution;
pub mod carbon;
pub mod chargeback;
pub mod checks;
pub mod cost;
pub mod endpoint;
pub mod forecast;
pub mod llm;
pub mod memory;
pub mod owned;
pub mod purchase;
pub mod quant;
pub mod queue;
pub mod regression;
pub mod rightsize;
pub mod rng;
pub mod transport;
pub mod uncertainty;
