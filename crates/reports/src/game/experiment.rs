//! Experiments of the game report: per variant of each experiment the events name, how its devices
//! converted, came back and spent, against the control, with intervals and p-values that stay
//! valid however often the result is looked at.
//!
//! A device's variant and exposure come from its events ([`super::attribution`]). Per variant,
//! over its exposed devices:
//!
//! - **conversion**: the share that did the conversion event (`purchaseEvent` unless set) at or
//!   after the exposure;
//! - **retention**: the share with an event 1 (and 7) days after the exposure's day, over the
//!   devices whose day has ended and is in the range;
//! - **revenue per device**: counted purchases from the exposure on, per device; and the same with
//!   CUPED ([`cuped`]): each device's revenue minus θ times its pre-period revenue's distance from
//!   the mean (the pre-period is the range before its exposure), θ the pooled regression slope,
//!   which narrows the interval by the share of variance the pre-period explains.
//!
//! Each figure has a 95% confidence interval (normal approximation), and each variant's
//! difference to the control (the variant named `control`, else the first by name) a 95% interval,
//! a fixed-horizon p-value (two-sided z-test) and an always-valid p-value: the mixture sequential
//! probability ratio test (mSPRT) of Johari, Koomen, Pekelis and Walsh, "Always Valid Inference:
//! Continuous Monitoring of A/B Tests" (Operations Research, 2022; "Peeking at A/B Tests", KDD
//! 2017), with a normal mixture of variance τ² = (0.2 σ)², σ the metric's pooled standard
//! deviation: the p-value a studio may read every day and stop at without inflating its false
//! positives. The sample-ratio check is Pearson's chi-squared test of the devices per variant
//! against equal shares; a p-value under 0.001 flags a mismatch (the assignment or the logging is
//! broken, and the figures are not to be trusted).

use std::collections::BTreeMap;

use serde::Serialize;
use statrs::distribution::{ChiSquared, ContinuousCDF, Normal};

use super::DAY_MICROS;
use super::attribution::{Exposure, RETURN_DAYS};
use super::texts::Texts;
use crate::figures;
use crate::text::TextTable;

/// The z of a two-sided 95% interval.
const Z95: f64 = 1.959_963_984_540_054;
/// The mSPRT mixture's standard deviation, as a share of the metric's pooled standard deviation.
pub const MIXTURE_SHARE: f64 = 0.2;
/// A sample-ratio check's p-value under this flags a mismatch.
pub const SRM_ALPHA: f64 = 0.001;
/// The variant compared with the others, when there is one of this name.
pub const CONTROL: &str = "control";

/// A figure of one variant: its value, interval, and difference to the control.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Measure {
    /// Devices it is over.
    pub devices: i64,
    /// The mean (a share for conversion and retention).
    pub value: Option<f64>,
    /// Its 95% confidence interval.
    pub interval: Option<[f64; 2]>,
    /// The difference to the control's value (none for the control).
    pub difference: Option<f64>,
    /// Its 95% confidence interval.
    pub difference_interval: Option<[f64; 2]>,
    /// The fixed-horizon p-value of the difference (two-sided z-test).
    pub p_value: Option<f64>,
    /// The always-valid p-value of the difference (mSPRT).
    pub always_valid_p_value: Option<f64>,
}

/// One variant of an experiment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Variant {
    /// Its name.
    pub name: String,
    /// Devices exposed to it.
    pub devices: i64,
    /// Their share of the experiment's devices.
    pub share: f64,
    /// Conversion to the conversion event.
    pub conversion: Measure,
    /// Retention 1 and 7 days after the exposure's day.
    pub retention: [Measure; 2],
    /// Revenue per device from the exposure on.
    pub revenue_per_device: Measure,
    /// The same, CUPED-adjusted by the pre-period's revenue.
    pub revenue_per_device_cuped: Measure,
}

/// An experiment's variants on one platform.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlatformVariants {
    /// The platform of the devices' first day.
    pub platform: String,
    /// Its variants, the control first.
    pub variants: Vec<Variant>,
    /// The sample-ratio check's p-value on this platform.
    pub sample_ratio_p_value: Option<f64>,
}

/// One experiment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Experiment {
    /// Its name (the `experiment` parameter).
    pub name: String,
    /// The event conversion counts.
    pub conversion_event: String,
    /// The variant the others are compared with.
    pub control: String,
    /// Its variants, the control first.
    pub variants: Vec<Variant>,
    /// The same by the platform of each device's first day (CUPED's θ the experiment's).
    pub by_platform: Vec<PlatformVariants>,
    /// The sample-ratio check's p-value (equal shares expected).
    pub sample_ratio_p_value: Option<f64>,
    /// Whether that p-value is under [`SRM_ALPHA`].
    pub sample_ratio_mismatch: bool,
    /// CUPED's slope θ: how much revenue after the exposure moves with revenue before it.
    pub cuped_theta: f64,
    /// The share of the revenue per device's variance CUPED removes.
    pub cuped_variance_reduction: Option<f64>,
    /// Whether events may still arrive on time within the range.
    pub provisional: bool,
}

/// The mean and sample variance of `values`, and how many there are.
fn moments(values: &[f64]) -> (usize, f64, f64) {
    let n = values.len();
    if n == 0 {
        return (0, 0.0, 0.0);
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    let var = if n > 1 {
        values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64
    } else {
        0.0
    };
    (n, mean, var)
}

fn normal() -> Option<Normal> {
    Normal::new(0.0, 1.0).ok()
}

/// The always-valid p-value of a difference `delta` whose estimate has variance `v`, under a
/// normal mixture of variance `tau2` (mSPRT): `min(1, 1/Λ)`, `Λ = sqrt(V/(V+τ²)) exp(τ²Δ²/(2V(V+τ²)))`.
pub fn msprt_p_value(delta: f64, v: f64, tau2: f64) -> Option<f64> {
    if v <= 0.0 || tau2 <= 0.0 || !delta.is_finite() {
        return None;
    }
    let log_lambda = 0.5 * (v / (v + tau2)).ln() + tau2 * delta * delta / (2.0 * v * (v + tau2));
    Some((-log_lambda).exp().min(1.0))
}

/// The measure of `values` of a variant against `control`'s.
fn measure(values: &[f64], control: Option<&[f64]>) -> Measure {
    let (n, mean, var) = moments(values);
    let mut m = Measure {
        devices: n as i64,
        ..Measure::default()
    };
    if n == 0 {
        return m;
    }
    m.value = Some(mean);
    let se = (var / n as f64).sqrt();
    m.interval = Some([mean - Z95 * se, mean + Z95 * se]);
    let Some(control) = control else { return m };
    let (nc, mc, vc) = moments(control);
    if nc == 0 {
        return m;
    }
    let delta = mean - mc;
    let v = var / n as f64 + vc / nc as f64;
    m.difference = Some(delta);
    m.difference_interval = Some([delta - Z95 * v.sqrt(), delta + Z95 * v.sqrt()]);
    if v > 0.0 {
        m.p_value = normal().map(|z| 2.0 * z.sf((delta / v.sqrt()).abs()));
        // The pooled per-device standard deviation of the two.
        let pooled = ((var * (n as f64 - 1.0) + vc * (nc as f64 - 1.0)) / ((n + nc) as f64 - 2.0).max(1.0)).sqrt();
        m.always_valid_p_value = msprt_p_value(delta, v, (MIXTURE_SHARE * pooled).powi(2));
    }
    m
}

/// CUPED: `y` adjusted by the covariate `x`, `y - θ (x - mean x)` with `θ = cov(x, y) / var(x)`
/// over all the pairs (0 when `x` does not vary); returns the adjusted values and θ.
pub fn cuped(y: &[f64], x: &[f64]) -> (Vec<f64>, f64) {
    let (n, my, _) = moments(y);
    let (_, mx, vx) = moments(x);
    if n < 2 || vx <= 0.0 {
        return (y.to_vec(), 0.0);
    }
    let cov = y.iter().zip(x).map(|(a, b)| (a - my) * (b - mx)).sum::<f64>() / (n - 1) as f64;
    let theta = cov / vx;
    (y.iter().zip(x).map(|(a, b)| a - theta * (b - mx)).collect(), theta)
}

/// Pearson's chi-squared p-value of `counts` against equal shares.
pub fn sample_ratio_p_value(counts: &[i64]) -> Option<f64> {
    let total: i64 = counts.iter().sum();
    if counts.len() < 2 || total == 0 {
        return None;
    }
    let expected = total as f64 / counts.len() as f64;
    let chi2: f64 = counts.iter().map(|&c| (c as f64 - expected).powi(2) / expected).sum();
    ChiSquared::new((counts.len() - 1) as f64).ok().map(|d| d.sf(chi2))
}

/// What the variants' figures are computed with.
struct Figures<'a> {
    control: &'a str,
    /// CUPED's slope and the mean pre-period revenue, the experiment's.
    theta: f64,
    mean_before: f64,
    /// The last day with events, and the first that has not ended (days since the epoch).
    last_day: i64,
    complete_before: i64,
}

impl Figures<'_> {
    /// The figures of `variants` (their exposures by name), the control first.
    fn variants(&self, variants: &BTreeMap<String, Vec<&Exposure>>) -> Vec<Variant> {
        let series = |exposed: &[&Exposure]| {
            let conversion: Vec<f64> = exposed.iter().map(|e| f64::from(u8::from(e.converted))).collect();
            let retention: [Vec<f64>; 2] = std::array::from_fn(|k| {
                exposed
                    .iter()
                    .filter(|e| {
                        let day = e.t.div_euclid(DAY_MICROS) + RETURN_DAYS[k];
                        day <= self.last_day && day < self.complete_before
                    })
                    .map(|e| f64::from(u8::from(e.returned[k])))
                    .collect()
            });
            let revenue: Vec<f64> = exposed.iter().map(|e| e.after).collect();
            let cuped: Vec<f64> = exposed
                .iter()
                .map(|e| e.after - self.theta * (e.before - self.mean_before))
                .collect();
            (conversion, retention, revenue, cuped)
        };
        let base = series(variants.get(self.control).map_or(&[][..], Vec::as_slice));
        let total: usize = variants.values().map(Vec::len).sum();
        let mut out: Vec<Variant> = variants
            .iter()
            .map(|(variant, exposed)| {
                let s = series(exposed);
                let is_control = variant == self.control;
                let against = |own: &[f64], base: &[f64]| measure(own, (!is_control).then_some(base));
                Variant {
                    name: variant.clone(),
                    devices: exposed.len() as i64,
                    share: exposed.len() as f64 / total.max(1) as f64,
                    conversion: against(&s.0, &base.0),
                    retention: [against(&s.1[0], &base.1[0]), against(&s.1[1], &base.1[1])],
                    revenue_per_device: against(&s.2, &base.2),
                    revenue_per_device_cuped: against(&s.3, &base.3),
                }
            })
            .collect();
        out.sort_by_key(|v| (v.name != self.control, v.name.clone()));
        out
    }
}

/// The experiments of `exposures` (texts by number in `texts`), and by the platform of each
/// device (`platform_of` its number); the last event walked was at `last`; days before
/// `complete_before` (days since the epoch) have ended.
pub(super) fn experiments(
    exposures: &[Exposure],
    texts: &Texts,
    platform_of: impl Fn(u32) -> String,
    last: i64,
    complete_before: i64,
    conversion_event: &str,
) -> Vec<Experiment> {
    let text = |n: u32| texts.get(n).unwrap_or_default().to_owned();
    let mut by: BTreeMap<String, BTreeMap<String, Vec<&Exposure>>> = BTreeMap::new();
    for e in exposures {
        by.entry(text(e.experiment))
            .or_default()
            .entry(text(e.variant))
            .or_default()
            .push(e);
    }
    let last_day = last.div_euclid(DAY_MICROS);
    by.into_iter()
        .map(|(name, variants)| {
            let control = if variants.contains_key(CONTROL) {
                CONTROL.to_owned()
            } else {
                variants.keys().next().cloned().unwrap_or_default()
            };
            let all: Vec<&Exposure> = variants.values().flatten().copied().collect();
            let (after, before): (Vec<f64>, Vec<f64>) = all.iter().map(|e| (e.after, e.before)).unzip();
            let (adjusted, theta) = cuped(&after, &before);
            let reduction = {
                let (variance, adjusted) = (moments(&after).2, moments(&adjusted).2);
                (variance > 0.0).then(|| 1.0 - adjusted / variance)
            };
            let mean_before = moments(&before).1;
            let figures = Figures {
                control: &control,
                theta,
                mean_before,
                last_day,
                complete_before,
            };
            let out = figures.variants(&variants);
            // The same per platform, CUPED's θ the experiment's.
            let mut platforms: BTreeMap<String, BTreeMap<String, Vec<&Exposure>>> = BTreeMap::new();
            for (variant, exposed) in &variants {
                for e in exposed {
                    platforms
                        .entry(platform_of(e.device))
                        .or_default()
                        .entry(variant.clone())
                        .or_default()
                        .push(e);
                }
            }
            let by_platform = platforms
                .into_iter()
                .map(|(platform, variants)| {
                    let variants = figures.variants(&variants);
                    let counts: Vec<i64> = variants.iter().map(|v| v.devices).collect();
                    PlatformVariants {
                        platform,
                        sample_ratio_p_value: sample_ratio_p_value(&counts),
                        variants,
                    }
                })
                .collect();
            let counts: Vec<i64> = out.iter().map(|v| v.devices).collect();
            let srm = sample_ratio_p_value(&counts);
            Experiment {
                name,
                conversion_event: conversion_event.to_owned(),
                control,
                variants: out,
                by_platform,
                sample_ratio_p_value: srm,
                sample_ratio_mismatch: srm.is_some_and(|p| p < SRM_ALPHA),
                cuped_theta: theta,
                cuped_variance_reduction: reduction,
                // Marked with the report's other whole-range figures.
                provisional: false,
            }
        })
        .collect()
}

impl Experiment {
    /// The variants' figures, for people: each with its interval, and the difference to the
    /// control with its always-valid p-value.
    pub(super) fn table(&self, currency: &str) -> TextTable {
        let mut table = TextTable::new([
            "variant",
            "devices",
            "conversion",
            "retention day 1",
            "revenue per device",
            "CUPED revenue per device",
        ]);
        // Shares in percent, their differences in percentage points.
        let share = |m: &Measure| cell(m, |v| figures::percent(Some(v)), |d| format!("{:+.1} pp", d * 100.0));
        let money = |m: &Measure| cell(m, |v| format!("{v:.3} {currency}"), |d| format!("{d:+.3} {currency}"));
        for v in &self.variants {
            table.push([
                crate::text::marked(v.name.clone(), self.provisional),
                figures::count(v.devices.max(0) as u64),
                share(&v.conversion),
                share(&v.retention[0]),
                money(&v.revenue_per_device),
                money(&v.revenue_per_device_cuped),
            ]);
        }
        table
    }

    /// The variants on each platform, for people: devices, conversion and revenue per device, each
    /// against the platform's control.
    pub(super) fn platform_table(&self, currency: &str) -> TextTable {
        let mut table = TextTable::new(["platform", "variant", "devices", "conversion", "revenue per device"]);
        let share = |m: &Measure| cell(m, |v| figures::percent(Some(v)), |d| format!("{:+.1} pp", d * 100.0));
        let money = |m: &Measure| cell(m, |v| format!("{v:.3} {currency}"), |d| format!("{d:+.3} {currency}"));
        for p in &self.by_platform {
            for v in &p.variants {
                table.push([
                    p.platform.clone(),
                    crate::text::marked(v.name.clone(), self.provisional),
                    figures::count(v.devices.max(0) as u64),
                    share(&v.conversion),
                    money(&v.revenue_per_device),
                ]);
            }
        }
        table
    }

    /// What the section says of the experiment, for people.
    pub(super) fn summary(&self) -> String {
        let srm = match self.sample_ratio_p_value {
            Some(p) if self.sample_ratio_mismatch => format!(
                "SAMPLE RATIO MISMATCH (p = {p:.2e}): the devices are not split as assigned; do not trust these figures"
            ),
            Some(p) => format!("sample ratio as expected (p = {p:.3})"),
            None => "one variant: no comparison".to_owned(),
        };
        format!(
            "Variants against {}; conversion is to {}; {srm}; CUPED removes {} of the revenue's variance. Each cell: \
             value [95% interval]; then the difference to {}, its 95% interval and always-valid p-value.",
            self.control,
            self.conversion_event,
            figures::percent(self.cuped_variance_reduction),
            self.control
        )
    }
}

/// A measure's cell: `value [interval]`, and against the control `Δ [interval] p=`, values shown
/// by `show` and differences by `difference`.
fn cell(m: &Measure, show: impl Fn(f64) -> String, difference: impl Fn(f64) -> String) -> String {
    let Some(value) = m.value else { return "-".to_owned() };
    let interval = |i: Option<[f64; 2]>, show: &dyn Fn(f64) -> String| {
        i.map_or_else(String::new, |[a, b]| format!(" [{}, {}]", show(a), show(b)))
    };
    let mut text = format!("{}{}", show(value), interval(m.interval, &show));
    if let Some(d) = m.difference {
        // A difference that rounds to nothing reads as +0, not -0.
        let d = if d.abs() < 1e-12 { 0.0 } else { d };
        text.push_str(&format!(
            "; {}{} p{}",
            difference(d),
            interval(m.difference_interval, &difference),
            m.always_valid_p_value.map_or_else(
                || "=-".to_owned(),
                |p| if p < 0.001 {
                    "<0.001".to_owned()
                } else {
                    format!("={p:.3}")
                }
            )
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_msprt_p_value_is_small_for_a_clear_difference_and_one_for_none() {
        // A difference of five standard errors: far below 0.05; none: 1.
        assert!(msprt_p_value(5.0, 1.0, 1.0).unwrap() < 0.01);
        assert_eq!(msprt_p_value(0.0, 1.0, 1.0), Some(1.0));
        // Always at least the fixed-horizon p-value of the same difference.
        let z = Normal::new(0.0, 1.0).unwrap();
        for d in [1.0, 2.0, 2.5, 3.0, 4.0] {
            let fixed = 2.0 * z.sf(d);
            assert!(msprt_p_value(d, 1.0, 1.0).unwrap() >= fixed, "{d}");
        }
        assert_eq!(msprt_p_value(1.0, 0.0, 1.0), None);
    }

    #[test]
    fn cuped_removes_what_the_pre_period_explains() {
        // Revenue after = revenue before + a little noise: θ is near 1 and most variance goes.
        let x: Vec<f64> = (0..200).map(|i| f64::from(i % 17)).collect();
        let y: Vec<f64> = x
            .iter()
            .enumerate()
            .map(|(i, v)| v + f64::from((i % 3) as u8) * 0.1)
            .collect();
        let (adjusted, theta) = cuped(&y, &x);
        assert!((theta - 1.0).abs() < 0.02, "{theta}");
        assert!(moments(&adjusted).2 < moments(&y).2 / 100.0);
        // The mean is kept.
        assert!((moments(&adjusted).1 - moments(&y).1).abs() < 1e-9);
        // A covariate that does not vary changes nothing.
        assert_eq!(cuped(&y, &vec![3.0; y.len()]), (y.clone(), 0.0));
    }

    #[test]
    fn the_sample_ratio_check_flags_a_broken_split() {
        assert!(sample_ratio_p_value(&[1000, 1010, 990]).unwrap() > 0.5);
        assert!(sample_ratio_p_value(&[1000, 800]).unwrap() < SRM_ALPHA);
        assert_eq!(sample_ratio_p_value(&[5]), None);
    }

    /// Many simulated experiments without an effect, each looked at every "day" (ten looks
    /// of growing samples): the always-valid p-value falls under 0.05 at some look in few of them,
    /// far fewer than the fixed-horizon p-value looked at the same way.
    #[test]
    fn peeking_at_the_always_valid_p_value_keeps_false_positives_rare() {
        use rand::rngs::StdRng;
        use rand::{Rng, SeedableRng};
        let mut rng = StdRng::seed_from_u64(7);
        let (mut always, mut fixed) = (0, 0);
        let runs = 300;
        for _ in 0..runs {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let (mut seen_always, mut seen_fixed) = (false, false);
            for _ in 0..10 {
                for _ in 0..100 {
                    a.push(f64::from(u8::from(rng.random_bool(0.1))));
                    b.push(f64::from(u8::from(rng.random_bool(0.1))));
                }
                let m = measure(&b, Some(&a));
                seen_always |= m.always_valid_p_value.is_some_and(|p| p < 0.05);
                seen_fixed |= m.p_value.is_some_and(|p| p < 0.05);
            }
            always += usize::from(seen_always);
            fixed += usize::from(seen_fixed);
        }
        assert!(always * 100 <= runs * 5, "{always} of {runs}");
        assert!(fixed > always * 2, "fixed {fixed}, always valid {always}");
    }
}
