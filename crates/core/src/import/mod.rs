pub mod hf;
