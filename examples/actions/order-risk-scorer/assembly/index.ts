// order-risk-scorer: eventflow's reference custom action (see ../README.md).
//
// Scores an order 0–100 with fixed integer arithmetic, compares the score with
// the RISK_THRESHOLD secret (default 70), upserts an `order_risk` projection
// and, when the score reaches the threshold, emits `orders.risk_flagged`.
// Returns 0 (REJECT) for a malformed payload.

import {
  Envelope,
  JsonKind,
  JsonObject,
  JsonValue,
  JsonWriter,
  REJECT,
  codePointCount,
  parseDecimalInt,
  readEnvelope,
  returnJson,
  trimAscii,
  truncateCodePoints,
} from "../../kit-assemblyscript/assembly";

// The ABI's allocator comes from the kit.
export { alloc } from "../../kit-assemblyscript/assembly";

const DEFAULT_THRESHOLD: i32 = 70;
const MAX_ENTITY_ID: i32 = 200; // SPEC §6: entity_id ≤ 200
const MAX_TITLE: i32 = 200; // SPEC §6: title ≤ 200

// Illustrative review list: uninhabited territories (AQ Antarctica, BV Bouvet
// Island, HM Heard & McDonald Islands) and ISO user-assigned codes often used
// for "unknown" (XX, ZZ).
const REVIEW_COUNTRIES: string[] = ["AQ", "BV", "HM", "XX", "ZZ"];

// Illustrative expected currency per country. Countries not listed never get
// `currency_mismatch`.
const CURRENCY_COUNTRIES: string[] = [
  "AT", "BE", "DE", "ES", "FI", "FR", "IE", "IT", "NL", "PT",
  "GB", "US", "CA", "CH", "JP", "AU",
];
const CURRENCY_EXPECTED: string[] = [
  "EUR", "EUR", "EUR", "EUR", "EUR", "EUR", "EUR", "EUR", "EUR", "EUR",
  "GBP", "USD", "CAD", "CHF", "JPY", "AUD",
];

/** True when `s` is exactly `n` ASCII uppercase letters. */
function isUpperCode(s: string | null, n: i32): bool {
  if (s == null || s.length != n) return false;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x41 || c > 0x5a) return false;
  }
  return true;
}

/** True when `s` has an "@" that is neither its first nor its last character. */
function looksLikeEmail(s: string | null): bool {
  if (s == null) return false;
  for (let i = 1; i < s.length - 1; i++) {
    if (s.charCodeAt(i) == 0x40) return true;
  }
  return false;
}

/** Units in the order: numeric qty → floor(max(qty, 0)); anything else → 1. */
function countUnits(items: JsonValue[]): f64 {
  let units: f64 = 0;
  for (let i = 0; i < items.length; i++) {
    let u: f64 = 1;
    const item = unchecked(items[i]).asObject();
    if (item != null) {
      const qty = item.getNumber("qty");
      if (qty != null) u = Math.floor(Math.max(qty.value, 0));
    }
    units += u;
  }
  return units;
}

class Score {
  points: i32 = 0;
  reasons: string[] = [];
  add(points: i32, reason: string): void {
    this.points += points;
    this.reasons.push(reason);
  }
}

function score(order: JsonObject, amount: f64): Score {
  const s = new Score();

  // 1. Amount bands (in the order's own currency; no conversion).
  if (amount >= 5000) s.add(40, "amount_very_high");
  else if (amount >= 1000) s.add(25, "amount_high");
  else if (amount >= 250) s.add(10, "amount_elevated");

  // 2. Account age.
  const customer = order.getObject("customer");
  const age = customer != null ? customer.getNumber("accountAgeDays") : null;
  if (age == null) s.add(20, "account_age_unknown");
  else if (age.value < 7) s.add(25, "account_new");
  else if (age.value < 30) s.add(10, "account_recent");

  // 3. Items.
  const itemsValue = order.getArray("items");
  const items: JsonValue[] = itemsValue != null ? itemsValue.items() : [];
  if (items.length == 0) s.add(15, "no_items");
  else {
    const units = countUnits(items);
    if (units >= 20) s.add(20, "bulk_quantity");
    else if (units >= 10) s.add(10, "many_units");
  }

  // 4. Country.
  const country = order.getString("country");
  const countryOk = isUpperCode(country, 2);
  if (!countryOk) s.add(15, "country_unknown");
  else if (REVIEW_COUNTRIES.includes(country!)) s.add(30, "country_review_list");

  // 5. Currency.
  const currency = order.getString("currency");
  if (!isUpperCode(currency, 3)) s.add(10, "currency_invalid");
  else if (countryOk) {
    const i = CURRENCY_COUNTRIES.indexOf(country!);
    if (i >= 0 && CURRENCY_EXPECTED[i] != currency!) s.add(15, "currency_mismatch");
  }

  // 6. Contact e-mail.
  const email = customer != null ? customer.getString("email") : null;
  if (!looksLikeEmail(email)) s.add(10, "email_invalid");

  if (s.points > 100) s.points = 100;
  return s;
}

/** RISK_THRESHOLD: absent → 70; a decimal string 0–100 (ASCII whitespace trimmed); else -1. */
function threshold(env: Envelope): i32 {
  const raw = env.secrets.get("RISK_THRESHOLD");
  if (raw == null) return DEFAULT_THRESHOLD;
  if (raw.kind != JsonKind.STRING) return -1;
  const t = parseDecimalInt(trimAscii(raw.asString()!.value));
  return t >= 0 && t <= 100 ? t : -1;
}

export function execute(ptr: usize, len: i32): usize {
  const env = readEnvelope(ptr, len);
  if (env == null) return REJECT;
  const order = env.payload.asObject();
  if (order == null) return REJECT;

  const orderId = order.getString("orderId");
  if (orderId == null || trimAscii(orderId).length == 0) return REJECT;
  if (codePointCount(orderId) > MAX_ENTITY_ID) return REJECT;
  const amountValue = order.getNumber("amount");
  if (amountValue == null) return REJECT;
  const amount = amountValue.value;
  if (!isFinite(amount) || amount < 0) return REJECT;
  const t = threshold(env);
  if (t < 0) return REJECT;

  const s = score(order, amount);
  const flagged = s.points >= t;

  const w = new JsonWriter();
  w.beginObject();
  w.key("projection").beginObject();
  w.key("name").string("order_risk");
  w.key("entity_type").string("order");
  w.key("entity_id").string(orderId);
  w.key("title").string(truncateCodePoints("Order " + orderId, MAX_TITLE));
  w.key("status").string(flagged ? "review" : "ok");
  w.key("data").beginObject();
  w.key("score").int(s.points);
  w.key("threshold").int(t);
  w.key("reasons").beginArray();
  for (let i = 0; i < s.reasons.length; i++) w.string(unchecked(s.reasons[i]));
  w.endArray();
  w.endObject(); // data
  w.endObject(); // projection
  w.key("derived_event");
  if (flagged) {
    w.beginObject();
    w.key("type").string("orders.risk_flagged");
    w.key("payload").beginObject();
    w.key("orderId").string(orderId);
    w.key("score").int(s.points);
    w.endObject();
    w.endObject();
  } else {
    w.bool(false);
  }
  w.key("score").int(s.points);
  w.endObject();
  return returnJson(w.toString());
}
