//! tcpdoctor-analyze: see Cargo.toml description. Filled in by its issue.
