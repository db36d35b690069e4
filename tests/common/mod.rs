#![allow(dead_code)]
pub mod kafka;
pub mod proxy;
pub mod secured;
pub mod sequence;
pub mod strait;
