//! Settings of the lakelog Lambdas, read from their environment once at cold start.
//!
//! Each Lambda's `Config::from_vars` takes its settings through a function from a name to a value
//! (the process environment in the Lambda, a map in tests) and reads them with a [`Vars`]: a
//! required setting, an optional one, a whole number in a range. Whatever is wrong comes back as a
//! [`ConfigError`] that names the setting and its value, so a bad deployment fails at cold start
//! with a message that says what to fix.
//!
//! ```
//! use env_config::{ConfigError, Vars};
//!
//! let vars = Vars::new(|name: &str| (name == "CONCURRENCY").then(|| " 80 ".to_owned()));
//! assert_eq!(vars.required("STREAM"), Err(ConfigError::Missing { name: "STREAM" }));
//! let err = vars.number("CONCURRENCY", 4, 1..=64).unwrap_err();
//! assert_eq!(err.to_string(), "CONCURRENCY=\" 80 \": expected a whole number from 1 to 64");
//! ```
//!
//! With the `lambda` feature, [`init::fail`] ends a function that cannot start (its settings, or
//! a table it cannot open) by reporting the reason to the Lambda Runtime API's init-error
//! endpoint, in words.

#[cfg(feature = "lambda")]
pub mod init;

mod vars;

pub use vars::{ConfigError, TABLE_LOCATION_FORMS, Vars, env_var, from_pairs, is_table_location, table_location};
