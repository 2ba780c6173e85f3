//! A comparison's figure as a small forest-plot bar, for `thrum web`'s
//! compare page: zero, the threshold band around it (a change inside it is
//! "no change"), the 95 % interval of the change as a bar and the change
//! as a dot, on a scale shared by every row so that the bars compare.
//! The better side of zero is tinted green, the worse orange, so a reader
//! sees which way a figure moved without reading whether higher is better.

use std::fmt::Write;

const W: f64 = 220.0;
const H: f64 = 22.0;

/// The bar of one figure: `change` and its `interval` in percent, the
/// `threshold` percent, the half-width of the axis `scale` percent (the
/// same for every row), and which way is better.
pub fn bar(
    change: Option<f64>,
    interval: Option<[f64; 2]>,
    threshold: f64,
    scale: f64,
    higher_is_better: bool,
) -> String {
    let scale = if scale.is_finite() && scale > 0.0 {
        scale
    } else {
        1.0
    };
    let x = |p: f64| W / 2.0 + (p / scale).clamp(-1.0, 1.0) * (W / 2.0 - 6.0);
    let (left, right) = if higher_is_better {
        ("#fff0e3", "#e6f4ea")
    } else {
        ("#e6f4ea", "#fff0e3")
    };
    let mut o = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {W} {H}\" class=\"bar\" width=\"{W}\" role=\"img\">\
<rect width=\"{}\" height=\"{H}\" fill=\"{left}\"/><rect x=\"{}\" width=\"{}\" height=\"{H}\" fill=\"{right}\"/>",
        W / 2.0,
        W / 2.0,
        W / 2.0
    );
    let (t0, t1) = (x(-threshold), x(threshold));
    let mid = W / 2.0;
    let _ = write!(
        o,
        "<rect x=\"{t0:.1}\" width=\"{:.1}\" height=\"{H}\" fill=\"#dee2e6\"/><line x1=\"{mid:.1}\" x2=\"{mid:.1}\" y1=\"0\" y2=\"{H}\" stroke=\"#495057\"/>",
        (t1 - t0).max(1.0)
    );
    if let Some([lo, hi]) = interval {
        let _ = write!(
            o,
            "<line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#1f2328\" stroke-width=\"3\"/>",
            x(lo),
            x(hi),
            H / 2.0,
            H / 2.0
        );
    }
    if let Some(c) = change {
        let _ = write!(
            o,
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"4.5\" fill=\"#0b5cad\" stroke=\"#fff\"/>",
            x(c),
            H / 2.0
        );
    }
    o.push_str("</svg>");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bar_is_well_formed_and_clamped() {
        let s = bar(Some(-40.0), Some([-60.0, -20.0]), 2.0, 30.0, true);
        roxmltree::Document::parse(&s).expect("well-formed");
        assert!(s.contains("viewBox"));
        // Clamped to the axis: nothing drawn past its ends.
        assert!(s.contains("x1=\"6.0\""), "{s}");
        let s = bar(None, None, 2.0, 0.0, false);
        roxmltree::Document::parse(&s).expect("well-formed");
    }
}
