//! The raw-key methods of [`Store`]: reads of any key, checked writes
//! ([`KeyWrite`], [`WritableKey`]) and range listings.

use metacore::api::storaged::{KvDeleted, KvRange, KvTreePage, KvTreeQuery, KvWrite, RangeQuery};
use metacore::key::{KeyWrite, WritableKey};

use super::Store;
use crate::error::Result;
use crate::kv;

impl Store {
    pub async fn kv_get(&self, key: String) -> Result<Option<String>> {
        self.readers.read_now(move |c| kv::get(c, &key)).await
    }

    pub async fn kv_put(&self, write: KeyWrite) -> Result<KvWrite> {
        self.writer.write(move |tx| kv::put(tx, &write)).await
    }

    pub async fn kv_delete(&self, key: WritableKey) -> Result<KvDeleted> {
        self.writer.write(move |tx| kv::delete(tx, &key)).await
    }

    pub async fn kv_range(&self, q: RangeQuery, limit: u32) -> Result<KvRange> {
        self.readers.read(move |c| kv::range(c, &q, limit)).await
    }

    pub async fn kv_tree(&self, q: KvTreeQuery) -> Result<KvTreePage> {
        self.readers.read(move |c| kv::tree(c, &q)).await
    }
}
