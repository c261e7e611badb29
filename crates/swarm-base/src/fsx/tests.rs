    use super::*;

    #[test]
    fn noreplace_refuses_existing_target() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a");
        let b = d.path().join("b");
        fs::write(&a, "a").unwrap();
        fs::write(&b, "b").unwrap();
        let e = move_noreplace(&a, &b).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(fs::read_to_string(&b).unwrap(), "b");
        assert!(a.exists());
    }

    #[test]
    fn replace_keeps_mode() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a");
        fs::write(&a, "old").unwrap();
        fs::set_permissions(&a, fs::Permissions::from_mode(0o640)).unwrap();
        replace(d.path(), &a, b"new").unwrap();
        assert_eq!(fs::read_to_string(&a).unwrap(), "new");
        assert_eq!(
            fs::metadata(&a).unwrap().permissions().mode() & 0o777,
            0o640
        );
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1);
    }

    #[test]
    fn read_bounded_refuses_symlink_fifo_and_big() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("f");
        fs::write(&f, "0123456789").unwrap();
        assert!(matches!(
            read_bounded(&f, 5),
            Err(ReadRefusal::TooLarge(10))
        ));
        let l = d.path().join("l");
        std::os::unix::fs::symlink(&f, &l).unwrap();
        assert!(matches!(read_bounded(&l, 100), Err(ReadRefusal::Symlink)));
        let p = d.path().join("p");
        rustix::fs::mkfifoat(rustix::fs::CWD, &p, rustix::fs::Mode::from(0o644)).unwrap();
        assert!(matches!(
            read_bounded(&p, 100),
            Err(ReadRefusal::NotRegular)
        ));
    }

    #[test]
    fn stale_temps_go_fresh_and_foreign_entries_stay() {
        let d = tempfile::tempdir().unwrap();
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
        let stale = d.path().join(".a.handoff.1.0.2.tmp");
        let fresh = d.path().join(".b.handoff.1.1.2.tmp");
        let other = d.path().join("planted.tmp");
        for p in [&stale, &fresh, &other] {
            fs::write(p, "x").unwrap();
        }
        for p in [&stale, &other] {
            File::options()
                .write(true)
                .open(p)
                .unwrap()
                .set_modified(old)
                .unwrap();
        }
        let link = d.path().join(".c.handoff.1.2.2.tmp");
        std::os::unix::fs::symlink(&other, &link).unwrap();
        let n = clean_stale_temps(d.path(), std::time::Duration::from_secs(3600)).unwrap();
        assert_eq!(n, 1);
        assert!(!stale.exists() && fresh.exists() && other.exists());
        assert!(fs::symlink_metadata(&link).is_ok());
    }

    #[test]
    fn a_folder_lock_is_exclusive_and_names_its_holder() {
        let d = tempfile::tempdir().unwrap();
        let held = try_lock_dir(d.path()).unwrap().unwrap();
        assert!(try_lock_dir(d.path()).unwrap().is_none());
        assert_eq!(lock_holder(d.path()), Some(std::process::id()));
        drop(held);
        assert!(try_lock_dir(d.path()).unwrap().is_some());
    }

    #[test]
    fn try_lock_sees_holder() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("l");
        let held = lock(&p).unwrap();
        assert!(try_lock(&p).unwrap().is_none());
        drop(held);
        assert!(try_lock(&p).unwrap().is_some());
    }
