#![allow(dead_code)]
pub mod kafka;
pub mod proxy;
pub mod sequence;
pub mod strait;
pub mod tls;
