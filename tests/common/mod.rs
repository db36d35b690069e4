#![allow(dead_code)]
pub mod kafka;
pub mod proxy;
pub mod scrape;
pub mod secured;
pub mod sequence;
pub mod strait;
