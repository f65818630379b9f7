//! Large directories of a repository, indexed once by name.
//!
//! An app's `path` is looked up from the commit's root tree one component at a time. In a
//! monorepo whose apps sit side by side in one directory, that directory's tree object is
//! large — 100,000 apps make a tree of about 4 MB — and reading it for every app's refresh
//! (inflate, then a scan) cost more than the rest of the render: at 10,000 apps per replica
//! it kept every core busy and, read on many blocking threads at once, left hundreds of
//! megabytes of freed buffers in the allocator's arenas. Argo CD's repo-server reads the
//! path from a checkout on disk instead. Here a tree over [`INDEXED_FROM`] bytes is indexed
//! once — a map from entry name to entry, built by one thread while the lookups that read
//! the tree meanwhile wait for it — and kept; a tree is immutable under its id, so the
//! index is never stale. The last [`KEEP`] such trees are kept per opened repository
//! (a new commit's root tree replaces its predecessor's); smaller trees are read as before.
//!
//! Every render starts from its commit's root tree: the last [`KEEP`] commits' root tree
//! ids are kept too, so the commit object is read once per commit, not once per app and
//! read (a takeover renders thousands of apps of one commit, twice each: the files listed,
//! then read).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use gix::ObjectId;
use gix::objs::tree::EntryMode;

/// A tree whose encoded size is at least this is indexed (about 1,600 entries).
pub(crate) const INDEXED_FROM: usize = 64 * 1024;

/// How many indexed trees an opened repository keeps.
pub(crate) const KEEP: usize = 4;

/// One tree's entries by name.
type Index = HashMap<Box<[u8]>, (EntryMode, ObjectId)>;

/// The indexes of an opened repository's large trees, newest last.
#[derive(Debug, Default)]
pub(crate) struct TreeIndexes {
    kept: Mutex<VecDeque<(ObjectId, Arc<Index>)>>,
    /// Held while a tree is indexed: the refreshes of a new commit all ask for its root at
    /// once, and one index is built while the others wait for it.
    building: Mutex<()>,
    /// Recent commits' root trees, newest last (a commit is immutable under its id).
    roots: Mutex<VecDeque<(ObjectId, ObjectId)>>,
}

impl TreeIndexes {
    /// The root tree of `commit`, read from the commit object once per recent commit.
    pub(crate) fn root(
        &self,
        repo: &gix::Repository,
        commit: ObjectId,
    ) -> Result<ObjectId, gix::Error> {
        if let Some((_, tree)) = self.roots().iter().rev().find(|(c, _)| *c == commit) {
            return Ok(*tree);
        }
        let tree = repo.find_commit(commit)?.tree_id()?.detach();
        let mut kept = self.roots();
        if !kept.iter().any(|(c, _)| *c == commit) {
            if kept.len() == KEEP {
                kept.pop_front();
            }
            kept.push_back((commit, tree));
        }
        Ok(tree)
    }

    /// The entry `name` of the tree `tree` (`None`: no such entry), read through the index
    /// when the tree is large.
    pub(crate) fn entry(
        &self,
        repo: &gix::Repository,
        tree: ObjectId,
        name: &[u8],
    ) -> Result<Option<(EntryMode, ObjectId)>, gix::Error> {
        if let Some(index) = self.kept(tree) {
            return Ok(index.get(name).copied());
        }
        let object = repo.find_tree(tree)?;
        let decoded = object.decode()?;
        if object.data.len() < INDEXED_FROM {
            return Ok(decoded
                .entries
                .iter()
                .find(|e| e.filename == name)
                .map(|e| (e.mode, e.oid.to_owned())));
        }
        let _building = self.building.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(index) = self.kept(tree) {
            return Ok(index.get(name).copied());
        }
        let index: Index = decoded
            .entries
            .iter()
            .map(|e| {
                (
                    e.filename.to_vec().into_boxed_slice(),
                    (e.mode, e.oid.to_owned()),
                )
            })
            .collect();
        let found = index.get(name).copied();
        self.keep(tree, Arc::new(index));
        Ok(found)
    }

    /// How many trees are indexed now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    fn kept(&self, tree: ObjectId) -> Option<Arc<Index>> {
        let kept = self.lock();
        kept.iter()
            .rev()
            .find(|(id, _)| *id == tree)
            .map(|(_, index)| Arc::clone(index))
    }

    /// Keeps `index` (called with `building` held, once `tree` was found not kept).
    fn keep(&self, tree: ObjectId, index: Arc<Index>) {
        let mut kept = self.lock();
        if kept.len() == KEEP {
            kept.pop_front();
        }
        kept.push_back((tree, index));
    }

    fn roots(&self) -> std::sync::MutexGuard<'_, VecDeque<(ObjectId, ObjectId)>> {
        // A list of pairs: no invariant a panic could break halfway.
        self.roots.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<(ObjectId, Arc<Index>)>> {
        // The map holds no invariant a panic could break halfway.
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use gix::objs::tree::{Entry, EntryKind};

    use super::*;

    /// A bare repository with a tree of `n` subdirectories `app-N` (each holding one file)
    /// and a file `README`; returns the repository and that tree's id.
    fn monorepo(dir: &std::path::Path, n: usize) -> (gix::Repository, ObjectId) {
        let repo = gix::init_bare(dir).unwrap();
        let blob = repo.write_blob(b"kind: ConfigMap\n").unwrap().detach();
        let mut app = gix::objs::Tree::empty();
        app.entries.push(Entry {
            mode: EntryKind::Blob.into(),
            filename: "cm.yaml".into(),
            oid: blob,
        });
        let app = repo.write_object(&app).unwrap().detach();
        let mut root = gix::objs::Tree::empty();
        for i in 0..n {
            root.entries.push(Entry {
                mode: EntryKind::Tree.into(),
                filename: format!("app-{i:05}").as_str().into(),
                oid: app,
            });
        }
        root.entries.push(Entry {
            mode: EntryKind::Blob.into(),
            filename: "README".into(),
            oid: blob,
        });
        root.entries.sort();
        let root = repo.write_object(&root).unwrap().detach();
        (repo, root)
    }

    #[test]
    fn a_large_tree_is_indexed_once_and_answers_as_a_scan_would() {
        let dir = tempfile::tempdir().unwrap();
        let (repo, root) = monorepo(dir.path(), 3_000);
        assert!(repo.find_tree(root).unwrap().data.len() >= INDEXED_FROM);
        let trees = TreeIndexes::default();
        let (mode, _) = trees.entry(&repo, root, b"app-02999").unwrap().unwrap();
        assert!(mode.is_tree());
        assert_eq!(trees.len(), 1, "indexed");
        let (mode, _) = trees.entry(&repo, root, b"README").unwrap().unwrap();
        assert!(mode.is_blob());
        assert_eq!(trees.entry(&repo, root, b"app-03000").unwrap(), None);
        assert_eq!(trees.len(), 1, "read once");
        // What the index answers is what the tree says.
        let scan = repo.find_tree(root).unwrap();
        for e in scan.decode().unwrap().entries.iter().step_by(97) {
            let found = trees.entry(&repo, root, e.filename).unwrap();
            assert_eq!(found, Some((e.mode, e.oid.to_owned())));
        }
    }

    #[test]
    fn a_small_tree_is_read_as_before_and_not_kept() {
        let dir = tempfile::tempdir().unwrap();
        let (repo, root) = monorepo(dir.path(), 10);
        let trees = TreeIndexes::default();
        assert!(trees.entry(&repo, root, b"app-00009").unwrap().is_some());
        assert_eq!(trees.entry(&repo, root, b"app-00010").unwrap(), None);
        assert_eq!(trees.len(), 0);
    }

    #[test]
    fn only_the_newest_large_trees_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let repo = gix::init_bare(dir.path()).unwrap();
        let blob = repo.write_blob(b"x").unwrap().detach();
        let mut roots = Vec::new();
        for commit in 0..KEEP + 2 {
            let mut root = gix::objs::Tree::empty();
            for i in 0..2_000 {
                root.entries.push(Entry {
                    mode: EntryKind::Blob.into(),
                    filename: format!("f-{commit}-{i:05}").as_str().into(),
                    oid: blob,
                });
            }
            root.entries.sort();
            roots.push(repo.write_object(&root).unwrap().detach());
        }
        let trees = TreeIndexes::default();
        for (commit, &root) in roots.iter().enumerate() {
            let name = format!("f-{commit}-00001");
            assert!(trees.entry(&repo, root, name.as_bytes()).unwrap().is_some());
        }
        assert_eq!(trees.len(), KEEP);
        assert!(trees.kept(roots[0]).is_none(), "the oldest went first");
        assert!(trees.kept(roots[KEEP + 1]).is_some());
    }

    /// Commits of the trees, each with the same signature and message.
    fn commits(repo: &gix::Repository, trees: &[ObjectId]) -> Vec<ObjectId> {
        let sig = gix::actor::Signature {
            name: "t".into(),
            email: "t@example.invalid".into(),
            time: gix::date::Time::new(1, 0),
        };
        let commit = |tree: ObjectId| {
            let c = gix::objs::Commit {
                tree,
                parents: Default::default(),
                author: sig.clone(),
                committer: sig.clone(),
                encoding: None,
                message: "m".into(),
                extra_headers: Vec::new(),
            };
            repo.write_object(&c).unwrap().detach()
        };
        trees.iter().map(|t| commit(*t)).collect()
    }

    #[test]
    fn a_commits_root_is_read_once_and_the_newest_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let repo = gix::init_bare(dir.path()).unwrap();
        let trees: Vec<ObjectId> = (0..KEEP + 1)
            .map(|i| {
                let blob = repo.write_blob(format!("{i}").as_bytes()).unwrap().detach();
                let mut t = gix::objs::Tree::empty();
                t.entries.push(Entry {
                    mode: EntryKind::Blob.into(),
                    filename: "f".into(),
                    oid: blob,
                });
                repo.write_object(&t).unwrap().detach()
            })
            .collect();
        let ids = commits(&repo, &trees);
        let indexes = TreeIndexes::default();
        assert_eq!(indexes.root(&repo, ids[0]).unwrap(), trees[0]);
        // The commit object gone from the store: its root is still known, read once.
        let hex = ids[0].to_string();
        let loose = dir.path().join("objects").join(&hex[..2]).join(&hex[2..]);
        std::fs::remove_file(&loose).unwrap();
        assert_eq!(indexes.root(&repo, ids[0]).unwrap(), trees[0]);
        // KEEP newer commits push it out: then it is read again (and is gone).
        for (id, tree) in ids.iter().zip(&trees).skip(1) {
            assert_eq!(indexes.root(&repo, *id).unwrap(), *tree);
        }
        assert!(indexes.root(&repo, ids[0]).is_err(), "read again, not kept");
        assert_eq!(indexes.root(&repo, ids[KEEP]).unwrap(), trees[KEEP]);
    }
}
