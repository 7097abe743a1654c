//! `scripts/release` packages every function `build/lambda/Makefile` builds: one zip each (the
//! binary as an executable `bootstrap`, the same bytes for the same binary), a template whose
//! functions point at them, checksums; and SAM packages that release for the stand-in's S3 as it
//! would for a real bucket. The binaries are stand-ins too: building them for release takes the
//! better part of an hour (BENCHMARKS.md), and `sam build` builds them the same way.

use std::path::{Path, PathBuf};
use std::process::Command;

use lakelog_tests::{StandIn, python, unique_name};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// The (template resource, crate) of each function, as the Makefile lists them.
fn functions() -> Vec<(String, String)> {
    let makefile = std::fs::read_to_string(format!("{ROOT}/build/lambda/Makefile")).unwrap();
    let target = regex::Regex::new(r"(?m)^build-(\w+): lambdas\n\tcp \$\(LAMBDA_DIR\)/([\w-]+)/bootstrap").unwrap();
    target
        .captures_iter(&makefile)
        .map(|c| (c[1].to_owned(), c[2].to_owned()))
        .collect()
}

fn release(binaries: &Path, out: &Path) {
    let status = Command::new(python())
        .arg(format!("{ROOT}/scripts/release"))
        .arg("--binaries")
        .arg(binaries)
        .arg("--out")
        .arg(out)
        .status()
        .unwrap();
    assert!(status.success());
}

/// The Python tools' own directory (cfn-lint, sam).
fn tool(name: &str) -> PathBuf {
    python().with_file_name(name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_holds_every_function_and_sam_packages_it() {
    let standin = StandIn::connect().await.unwrap();
    let functions = functions();
    assert_eq!(functions.len(), 5, "{functions:?}");
    let dir = tempfile::tempdir().unwrap();
    let binaries = dir.path().join("binaries");
    for (_, krate) in &functions {
        let folder = binaries.join("x86_64").join(krate);
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("bootstrap"), format!("the binary of {krate}")).unwrap();
    }
    release(&binaries, &dir.path().join("one"));
    release(&binaries, &dir.path().join("two"));
    let version = env!("CARGO_PKG_VERSION");
    let one = dir.path().join("one").join(format!("lakelog-{version}"));
    let two = dir.path().join("two").join(format!("lakelog-{version}"));
    let sums = std::fs::read_to_string(one.join("SHA256SUMS")).unwrap();
    assert_eq!(
        sums,
        std::fs::read_to_string(two.join("SHA256SUMS")).unwrap(),
        "the same binaries, other bytes"
    );
    assert_eq!(sums.lines().count(), functions.len() + 3, "{sums}");
    let checked = Command::new("sha256sum")
        .arg("-c")
        .arg("SHA256SUMS")
        .current_dir(&one)
        .output()
        .unwrap();
    assert!(checked.status.success(), "{}", String::from_utf8_lossy(&checked.stdout));

    // Each zip holds its function's binary, executable, as `bootstrap`.
    let listing = Command::new(python())
        .arg("-c")
        .arg(
            "import json, sys, zipfile\n\
             z = zipfile.ZipFile(sys.argv[1])\n\
             print(json.dumps([[i.filename, i.external_attr >> 16, z.read(i).decode()] for i in z.infolist()]))",
        )
        .arg(one.join("x86_64").join(format!("{}.zip", functions[4].0)))
        .output()
        .unwrap();
    let listing: serde_json::Value = serde_json::from_slice(&listing.stdout).unwrap();
    assert_eq!(
        listing,
        serde_json::json!([["bootstrap", 0o100755, format!("the binary of {}", functions[4].1)]])
    );

    // The template names each zip, and nothing is left to build.
    let template = one.join("template-x86_64.yaml");
    let text = std::fs::read_to_string(&template).unwrap();
    for (id, _) in &functions {
        assert!(text.contains(&format!("CodeUri: x86_64/{id}.zip")), "{id}");
    }
    assert!(!text.contains("BuildMethod"));
    let lint = Command::new(tool("cfn-lint")).arg(&template).output().unwrap();
    assert!(lint.status.success(), "{}", String::from_utf8_lossy(&lint.stdout));

    // SAM uploads every zip, and the repository metadata's files.
    let bucket = unique_name("release");
    standin.s3().create_bucket().bucket(&bucket).send().await.unwrap();
    let packaged = dir.path().join("packaged.yaml");
    let output = Command::new(tool("sam"))
        .args(["package", "--template-file"])
        .arg(&template)
        .args(["--s3-bucket", &bucket, "--output-template-file"])
        .arg(&packaged)
        .envs(lakelog_tests::runtime_api::Function::standin_vars(standin.endpoint()))
        .env("AWS_REGION", lakelog_tests::REGION)
        .env("SAM_CLI_TELEMETRY", "0")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let packaged = std::fs::read_to_string(packaged).unwrap();
    assert_eq!(
        packaged.matches(&format!("CodeUri: s3://{bucket}/")).count(),
        functions.len(),
        "{packaged}"
    );
    for url in ["LicenseUrl", "ReadmeUrl"] {
        assert!(packaged.contains(&format!("{url}: s3://{bucket}/")), "{url}");
    }
}
