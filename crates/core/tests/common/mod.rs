pub mod generate;
pub mod reference;
