//! `buzz dev`: the whole relay in one process on loopback (`command.rs`), the keys and local
//! community it keeps between runs (`community.rs`), and what it prints once up (`banner.rs`,
//! with NIP-19 keys from `nip19.rs`).

pub mod banner;
pub mod command;
pub mod community;
pub mod nip19;
