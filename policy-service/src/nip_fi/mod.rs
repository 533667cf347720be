//! The NIP-FI policy plane: the operator routes (`routes.rs`) over validated requests
//! (`request.rs`), the accepting transaction (`accept.rs`), issuer bindings (`bindings.rs`), what
//! the routes answer (`view.rs`), the SQL and the spec's lock order (`store.rs`), and the periodic
//! revalidator that tells gateways which communities require FI (`revalidator.rs`).

pub mod accept;
pub mod bindings;
pub mod request;
pub mod revalidator;
pub mod routes;
pub mod store;
pub mod view;
