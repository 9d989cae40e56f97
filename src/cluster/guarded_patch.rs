//! A patch that must apply to the object as it was read. When the apiserver answers that the
//! object moved on (a conflict, or a JSON patch's `test` that no longer holds), the object is read
//! again and the patch made anew from it, a bounded number of times. The ways out use it: removing
//! ocifit's gates from pods and its taint from nodes.

use std::fmt::Debug;

use kube::Api;
use kube::api::{Patch, PatchParams};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Attempts per object when it keeps changing under the patch.
pub const ATTEMPTS: usize = 5;

/// Patches `name` with what `patch_for` makes of `current`: `Ok(true)` applied, `Ok(false)`
/// nothing to do, `Err(None)` it changed under every attempt, `Err(Some(_))` refused otherwise;
/// an answer whose code is in `moved_on` means "read again".
pub async fn patch_as_read<K, P>(
    api: &Api<K>,
    name: &str,
    mut current: K,
    moved_on: &[u16],
    patch_for: impl Fn(&K) -> Option<Patch<P>>,
) -> Result<bool, Option<kube::Error>>
where
    K: Clone + DeserializeOwned + Debug,
    P: Serialize + Debug,
{
    for _ in 0..ATTEMPTS {
        let Some(patch) = patch_for(&current) else {
            return Ok(false);
        };
        match api.patch(name, &PatchParams::default(), &patch).await {
            Ok(_) => return Ok(true),
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(false),
            Err(kube::Error::Api(status)) if moved_on.contains(&status.code) => {
                match api.get_opt(name).await {
                    Ok(Some(object)) => current = object,
                    Ok(None) => return Ok(false),
                    Err(source) => return Err(Some(source)),
                }
            }
            Err(source) => return Err(Some(source)),
        }
    }
    Err(None)
}
