//! `lakelog generate-logs`: write a synthetic raw-logs folder, for trying the pipeline and
//! measuring it (see BENCHMARKS.md).

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use fixtures::log_lines::{Synth, SynthConfig};
use flate2::Compression;
use flate2::write::GzEncoder;

use crate::cli::GenerateLogsArgs;

/// Runs `lakelog generate-logs`.
pub fn run(args: &GenerateLogsArgs) -> anyhow::Result<ExitCode> {
    std::fs::create_dir_all(&args.out).with_context(|| format!("cannot create {}", args.out.display()))?;
    let mut synth = Synth::new(SynthConfig {
        seed: args.seed,
        malformed_rate: args.malformed_rate,
        ..SynthConfig::default()
    });
    let object_bytes = args.object_bytes.max(1);
    let objects = args.bytes.div_ceil(object_bytes);
    let mut text = Vec::with_capacity(object_bytes as usize + 4096);
    let mut written = 0u64;
    for i in 0..objects {
        text.clear();
        synth.fill(&mut text, object_bytes as usize);
        let json;
        let buf = if args.json {
            json = fixtures::cloudwatch_json::from_text(&text);
            &json
        } else {
            &text
        };
        written += buf.len() as u64;
        let name = format!("{:04}-{:02}-{:02}-00-00-{i:06}", 2024, 6, 1);
        let path = if args.gzip {
            let path = args.out.join(format!("{name}.gz"));
            let mut enc = GzEncoder::new(Vec::new(), Compression::fast());
            enc.write_all(buf)?;
            std::fs::write(&path, enc.finish()?)?;
            path
        } else {
            let path = args.out.join(name);
            std::fs::write(&path, buf)?;
            path
        };
        if i == 0 {
            eprintln!("writing {objects} objects like {}", path.display());
        }
    }
    println!(
        "wrote {objects} objects, {} lines ({} malformed), {:.1} MB uncompressed into {}",
        synth.lines(),
        synth.malformed(),
        written as f64 / 1e6,
        args.out.display()
    );
    Ok(ExitCode::SUCCESS)
}
