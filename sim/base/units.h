#pragma once
// Physical quantities as distinct types (units are types: each line checkable by reading it alone).
//
// - Bytes: exact int64 count, signed so that ledger deltas are Bytes too.
// - Duration: int64 picoseconds, the engine's clock. Floating seconds enter only through
//   Duration::FromSeconds, which rounds to the nearest picosecond (half away from zero) and never
//   truncates, so a 0.4 ps cost does not silently vanish from a sum of many: it is one
//   rounding per op, bounded by 0.5 ps.
// - Flops, FlopRate, Bandwidth: doubles (one step of a 70B model is ~1e21 FLOPs).
//
// Values are made through named makers (Bytes::GiB(80), Bandwidth::Gbps(400)) and read back only
// by naming the unit again (b.gib(), bw.bytes_per_s()). Only physically meaningful arithmetic is
// defined: Bytes / Bandwidth -> Duration, Flops / FlopRate -> Duration, scaling by a number,
// sharing out (Bytes / n, Duration / n) and ratios of like quantities (Bytes / Bytes,
// Duration / Duration -> double).

#include <compare>
#include <concepts>
#include <cstdint>

namespace sim {

class Bytes {
 public:
  constexpr Bytes() = default;
  static constexpr Bytes Count(int64_t n) { return Bytes(n); }
  // Decimal (SI) and binary (IEC) prefixes; fractional inputs round to the nearest byte.
  static Bytes KB(double v) { return Round(v * 1e3); }
  static Bytes MB(double v) { return Round(v * 1e6); }
  static Bytes GB(double v) { return Round(v * 1e9); }
  static Bytes TB(double v) { return Round(v * 1e12); }
  static Bytes KiB(double v) { return Round(v * 1024.0); }
  static Bytes MiB(double v) { return Round(v * 1048576.0); }
  static Bytes GiB(double v) { return Round(v * 1073741824.0); }
  static Bytes Round(double bytes);

  constexpr int64_t count() const { return n_; }
  constexpr double gb() const { return static_cast<double>(n_) / 1e9; }
  constexpr double gib() const { return static_cast<double>(n_) / 1073741824.0; }
  constexpr double mb() const { return static_cast<double>(n_) / 1e6; }

  constexpr Bytes operator+(Bytes o) const { return Bytes(n_ + o.n_); }
  constexpr Bytes operator-(Bytes o) const { return Bytes(n_ - o.n_); }
  constexpr Bytes operator-() const { return Bytes(-n_); }
  constexpr Bytes& operator+=(Bytes o) {
    n_ += o.n_;
    return *this;
  }
  constexpr Bytes& operator-=(Bytes o) {
    n_ -= o.n_;
    return *this;
  }
  constexpr Bytes operator*(int64_t k) const { return Bytes(n_ * k); }
  friend constexpr Bytes operator*(int64_t k, Bytes b) { return Bytes(k * b.n_); }
  // Scaled by a real factor (a fraction, an efficiency), rounded once to the nearest byte.
  template <std::floating_point T>
  Bytes operator*(T k) const {
    return Round(static_cast<double>(n_) * static_cast<double>(k));
  }
  // One of n equal shares, rounded down (as integer division); CeilDiv rounds up (a shard that
  // holds the remainder).
  constexpr Bytes operator/(int64_t n) const { return Bytes(n_ / n); }
  constexpr Bytes CeilDiv(int64_t n) const { return Bytes((n_ + n - 1) / n); }
  // The ratio of two sizes.
  constexpr double operator/(Bytes o) const {
    return static_cast<double>(n_) / static_cast<double>(o.n_);
  }
  constexpr auto operator<=>(const Bytes&) const = default;

 private:
  constexpr explicit Bytes(int64_t n) : n_(n) {}
  int64_t n_ = 0;
};

class Duration {
 public:
  constexpr Duration() = default;
  static constexpr Duration Picoseconds(int64_t ps) { return Duration(ps); }
  // The one place where floating time becomes integer time: round half away from zero. Inline:
  // the replay converts every op's time through it.
  static Duration FromSeconds(double s) {
    const double ps = s * 1e12;
    if (!(ps > -0x1p63 && ps < 0x1p63)) [[unlikely]] {
      if (ps >= 0x1p63) return Duration(INT64_MAX);  // past the clock: saturated, as sums are
      if (ps <= -0x1p63) return Duration(INT64_MIN);
      OutOfRange(s);  // NaN: an internal check fails
    }
    return Duration(ps >= 0 ? static_cast<int64_t>(ps + 0.5) : -static_cast<int64_t>(-ps + 0.5));
  }
  static Duration Nanoseconds(double ns) { return FromSeconds(ns * 1e-9); }
  static Duration Microseconds(double us) { return FromSeconds(us * 1e-6); }
  static Duration Milliseconds(double ms) { return FromSeconds(ms * 1e-3); }
  static constexpr Duration Zero() { return Duration(0); }

  constexpr int64_t picoseconds() const { return ps_; }
  constexpr double seconds() const { return static_cast<double>(ps_) * 1e-12; }
  constexpr double microseconds() const { return static_cast<double>(ps_) * 1e-6; }

  // Sums, differences and multiples saturate at ±(2^63 − 1) ps instead of wrapping: a step past
  // the clock (inputs within their bounds can add up to more than 106 days) stays past it, and
  // Simulate refuses it (kClockLimit), rather than coming out negative.
  constexpr Duration operator+(Duration o) const { return Duration(Saturated(ps_, o.ps_)); }
  constexpr Duration operator-(Duration o) const {
    return o.ps_ == INT64_MIN ? Duration(Saturated(Saturated(ps_, INT64_MAX), 1))
                              : Duration(Saturated(ps_, -o.ps_));
  }
  constexpr Duration& operator+=(Duration o) { return *this = *this + o; }
  constexpr Duration& operator-=(Duration o) { return *this = *this - o; }
  constexpr Duration operator*(int64_t k) const {
    int64_t out = 0;
    if (__builtin_mul_overflow(ps_, k, &out)) out = (ps_ < 0) != (k < 0) ? INT64_MIN : INT64_MAX;
    return Duration(out);
  }
  // One of n equal shares, rounded down to the picosecond.
  constexpr Duration operator/(int64_t n) const { return Duration(ps_ / n); }
  // The ratio of two durations (a share of the step, a slowdown).
  constexpr double operator/(Duration o) const {
    return static_cast<double>(ps_) / static_cast<double>(o.ps_);
  }
  constexpr auto operator<=>(const Duration&) const = default;

 private:
  [[noreturn]] static void OutOfRange(double s);
  static constexpr int64_t Saturated(int64_t a, int64_t b) {
    int64_t out = 0;
    if (__builtin_add_overflow(a, b, &out)) out = b > 0 ? INT64_MAX : INT64_MIN;
    return out;
  }
  constexpr explicit Duration(int64_t ps) : ps_(ps) {}
  int64_t ps_ = 0;
};

class Flops {
 public:
  constexpr Flops() = default;
  static constexpr Flops Count(double n) { return Flops(n); }
  constexpr double count() const { return n_; }
  constexpr Flops operator+(Flops o) const { return Flops(n_ + o.n_); }
  constexpr Flops& operator+=(Flops o) {
    n_ += o.n_;
    return *this;
  }
  constexpr Flops operator*(double k) const { return Flops(n_ * k); }
  constexpr auto operator<=>(const Flops&) const = default;

 private:
  constexpr explicit Flops(double n) : n_(n) {}
  double n_ = 0;
};

class FlopRate {
 public:
  constexpr FlopRate() = default;
  static constexpr FlopRate PerSecond(double f) { return FlopRate(f); }
  static constexpr FlopRate TFLOPs(double t) { return FlopRate(t * 1e12); }
  constexpr double per_second() const { return f_; }
  constexpr double tflops() const { return f_ / 1e12; }
  constexpr FlopRate operator*(double k) const { return FlopRate(f_ * k); }
  constexpr auto operator<=>(const FlopRate&) const = default;

 private:
  constexpr explicit FlopRate(double f) : f_(f) {}
  double f_ = 0;
};

class Bandwidth {
 public:
  constexpr Bandwidth() = default;
  static constexpr Bandwidth BytesPerSecond(double b) { return Bandwidth(b); }
  static constexpr Bandwidth GBps(double g) { return Bandwidth(g * 1e9); }
  // Network vendors quote bits: 400 Gb/s = 50 GB/s.
  static constexpr Bandwidth Gbps(double g) { return Bandwidth(g * 1e9 / 8.0); }
  constexpr double bytes_per_s() const { return b_; }
  constexpr double gbps_bytes() const { return b_ / 1e9; }
  constexpr Bandwidth operator*(double k) const { return Bandwidth(b_ * k); }
  constexpr auto operator<=>(const Bandwidth&) const = default;

 private:
  constexpr explicit Bandwidth(double b) : b_(b) {}
  double b_ = 0;
};

// The rate of moving `bytes` in `d` (nccl-tests' bus bandwidth). d must be positive.
Bandwidth operator/(Bytes bytes, Duration d);
// Time to move `bytes` at `bw` (rounded to the nearest picosecond). bw must be positive.
Duration operator/(Bytes bytes, Bandwidth bw);
// Time to execute `work` at `rate` (rounded to the nearest picosecond). rate must be positive.
Duration operator/(Flops work, FlopRate rate);

}  // namespace sim
