//! Security: the doors (authentication in one layer that fails closed, modes that only
//! operators and internal callers add, clients that log in, downloads that stay in their
//! folder) and what callers are told when something fails.

mod auth_matrix;
mod clients;
mod downloads;
pub(crate) mod errors;
mod exposure;
mod isolation;
mod modes;
