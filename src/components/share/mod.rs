//! Sharing: the notice after opening a link, "Copy link", and the Embed dialog.
//!
//! One view per file: [`link_notice`], [`ShareButtons`], [`EmbedBuilder`].

mod buttons;
mod embed_builder;
mod notice;

pub use buttons::{ShareButtons, ShareProps};
pub use embed_builder::{EmbedBuilder, EmbedBuilderProps};
pub use notice::{link_notice, retry_button};
