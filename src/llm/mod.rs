//! The LLM setup's logic: its fields and what a field's text sets (`setup`), and what the setup
//! answers beside the estimate (`answers`). Pure (no web-sys), tested natively.

pub mod answers;
pub mod setup;
