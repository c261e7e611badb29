//! Who runs this process: the account name from the password database,
//! for the socket's folder and a person's byline on an approval.

use std::ffi::CStr;

/// The name of this process's account (getpwuid_r of its real uid), when
/// the password database has one.
pub fn name() -> Option<String> {
    // SAFETY: getpwuid_r writes into the buffers we own; the name is copied
    // out before they go away.
    unsafe {
        let uid = libc::getuid();
        let mut pwd: libc::passwd = std::mem::zeroed();
        let mut buf = vec![0 as libc::c_char; 4096];
        let mut res: *mut libc::passwd = std::ptr::null_mut();
        let rc = libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut res);
        if rc == 0 && !res.is_null() && !pwd.pw_name.is_null() {
            return Some(CStr::from_ptr(pwd.pw_name).to_string_lossy().into_owned());
        }
        None
    }
}
