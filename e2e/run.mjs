// End-to-end walk through Governor's web UI in headless Chromium, started by
// e2e_test.go with the server's URL and the users' passwords in the
// environment. Every step saves a screenshot to $SCREENSHOTS; any failed
// expectation exits non-zero with the reason.
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";

const base = process.env.BASE_URL;
const shots = process.env.SCREENSHOTS;
const pw = process.env.USER_PASSWORD;
mkdirSync(shots, { recursive: true });

function expect(cond, what) {
  if (!cond) throw new Error("expectation failed: " + what);
  console.log("ok  " + what);
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
});
const cspViolations = [];

async function session(name, viewport = { width: 1280, height: 860 }) {
  const ctx = await browser.newContext({ viewport });
  const page = await ctx.newPage();
  page.on("console", (m) => { if (/Content Security Policy|Refused to/.test(m.text())) cspViolations.push(m.text()); });
  page.setDefaultTimeout(20000);
  await page.goto(base + "/");
  expect(page.url().includes("/login"), `${name}: anonymous visit lands on the login page`);
  await page.fill("#name", name);
  await page.fill("#password", pw);
  await page.click("button[type=submit]");
  await page.waitForURL(base + "/");
  return { ctx, page };
}

async function shot(page, name) {
  await page.screenshot({ path: `${shots}/${name}.png`, fullPage: true });
}

try {
  // Login page.
  {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    const page = await ctx.newPage();
    await page.goto(base + "/login");
    await shot(page, "01-login");
    await page.fill("#name", "alice");
    await page.fill("#password", "wrong password here");
    await page.click("button[type=submit]");
    expect((await page.textContent(".banner-error")).includes("Wrong user name or password") && page.url().includes("/login"),
      "a wrong password is refused and the visitor stays on the login page");
    await ctx.close();
  }

  // Alice: the overview updates live during the incident.
  const alice = await session("alice");
  let p = alice.page;
  // Every seeded service has a row with its load score, a number between 0 and 1.
  const scores = await p.$$eval("#overview-rows tr", (trs) => trs.map((tr) => [
    (tr.querySelector("td a")?.textContent || "").trim(), (tr.querySelector("td.num")?.textContent || "").trim()]));
  expect(scores.length === 6 && scores.every(([name, s]) => name !== "" && /^[01]\.\d\d$/.test(s)),
    "the overview lists every service with its load score: " + scores.map((r) => r.join(" ")).join(", "));
  // The stream replaces the rows in place: a mark set on this document
  // survives only if nothing reloads the page while the scores change.
  await p.evaluate(() => { document.body.dataset.e2eMark = "same-document"; });
  const scoreOf = (svc) => `#overview-rows tr:has(a[href="/services/${svc}"]) > td.num:nth-child(2) > span.score`;
  const before = (await p.textContent(scoreOf("payments"))).trim();
  await p.waitForSelector('#live[data-state="live"]');
  expect(true, "the overview stream is live");
  await p.waitForSelector(`${scoreOf("payments")}:not(:text-is("${before}"))`);
  const after = (await p.textContent(scoreOf("payments"))).trim();
  // The incident (checkout's score climbs to 0.92 for 10 s of every 30 s) reaches the open page.
  // (The handle keeps the row it matched, even once the stream replaces it.)
  const hot = await p.waitForSelector('#overview-rows tr:has(a[href="/services/checkout"]):has(strong.score-high:text-is("overloaded"))', { timeout: 35000 });
  const high = Number((await hot.$eval("td.num:nth-child(2) > span.score", (e) => e.textContent)).trim());
  expect(high >= 0.8 && await p.evaluate(() => document.body.dataset.e2eMark) === "same-document",
    `the scores update without a reload (payments ${before} → ${after}) and the incident shows up: checkout ${high.toFixed(2)}, overloaded`);
  await shot(p, "02-overview-incident");

  await p.click('#overview-rows a[href="/services/checkout"]');
  await p.waitForURL(base + "/services/checkout");
  await p.waitForSelector("svg.chart");
  const terms = await p.$$eval('.card:has(h2:text-is("Why the score is what it is")) tbody tr td:first-child', (tds) => tds.map((t) => t.textContent.trim()));
  expect(/^[01]\.\d\d/.test((await p.textContent("p.score")).trim()) && ["cpu", "memory", "latency"].every((t) => terms.includes(t)),
    "the service page shows checkout's load score and explains it by its terms: " + terms.join(", "));
  await shot(p, "03-service");

  // The engine's recommendation with its evidence.
  await p.click('nav >> text=Recommendations');
  await p.waitForURL(base + "/recommendations");
  const rec3 = p.locator("div.card.rec").filter({ has: p.locator('h2 a[href="/recommendations/checkout/3"]') });
  expect((await rec3.textContent()).includes("load score 0.91 above 0.80") && (await rec3.locator("dd.effect").textContent()).trim() !== "",
    "the engine's proposal v3 is listed with its reason and expected effect");
  await rec3.locator("details summary").click();
  await rec3.locator("details[open] pre").waitFor();
  expect((await rec3.locator("details[open] pre").textContent()).includes('"setpoint"'), "its raw evidence opens on a click");
  await shot(p, "04-recommendations");
  // The recommendation's own page: the engine's evidence explained, with its charts.
  await p.click('a[href="/recommendations/checkout/3"]');
  await p.waitForURL(/recommendations\/checkout\/3$/);
  await p.waitForSelector(".evcharts svg.chart");
  const ev = await p.evaluate(() => [...document.querySelectorAll(".evcharts figure")].map((f) => ({
    title: f.querySelector("h3")?.textContent || "",
    svg: !!f.querySelector("svg.chart"),
    axes: f.querySelectorAll("svg.chart line.axis").length,
    ticks: f.querySelectorAll("svg.chart text").length,
  })));
  expect(ev.length === 4 && ev.every((c) => c.svg && c.axes === 2 && c.ticks > 0),
    "the evidence charts render as SVG with both axes and labels: " + JSON.stringify(ev));
  expect(ev.some((c) => c.title.startsWith("Load score")) && ev.some((c) => c.title.startsWith("p99 latency")), "load score and p99 are among the evidence charts");
  const facts = await p.textContent(".rec");
  expect(facts.includes("Expected effect") && facts.includes("P + I + D") && facts.includes("Healthy baselines"),
    "the evidence view shows the effect, the controller terms and the detector, not raw JSON");
  await shot(p, "04b-recommendation-detail");
  {
    // The same page on a phone: nothing scrolls sideways.
    const ctx = await browser.newContext({ viewport: { width: 375, height: 812 }, storageState: await alice.ctx.storageState() });
    const phone = await ctx.newPage();
    await phone.goto(base + "/recommendations/checkout/3");
    await phone.waitForSelector(".evcharts svg.chart");
    const w = await phone.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
    expect(w[0] <= w[1], `the recommendation page does not scroll sideways on a 375 px phone (scrollWidth ${w[0]}, innerWidth ${w[1]})`);
    await shot(phone, "04c-recommendation-phone");
    await ctx.close();
  }
  await p.goto(base + "/services/checkout/rules/3");
  expect((await p.textContent(".card .state")).trim() === "proposed" && (await p.locator('h2:text-is("Evidence")').count()) === 1 &&
    (await p.locator('a[href="/recommendations/checkout/3"]').count()) === 1,
    "the version page shows v3 as proposed, with its evidence and a link to it explained");
  expect(await p.inputValue('form[action$="/rules/3/approve"] input[name=checksum]') !== "", "the approve form carries the checksum of the ruleset shown");
  // Alice is an approver but did not propose it (the engine did): she may approve. She proposes her own change instead
  // to see self-approval refused.
  await p.goto(base + "/services/checkout/propose");
  const yaml = await p.inputValue("#ruleset");
  await p.fill("#ruleset", yaml.replace("rate: 500", "rate: -1"));
  await p.fill("#reason", "try a bad value");
  await p.click('button:text-is("Propose")');
  await p.waitForSelector("#field-errors");
  expect((await p.textContent("#field-errors")).includes("ruleset.routes[0].rate_limit.rate"), "an invalid field is named inline");
  await shot(p, "05-propose-field-error");
  await p.fill("#ruleset", yaml.replace("rate: 500", "rate: 450"));
  await p.fill("#reason", "a little less for the holidays");
  await p.click('button:text-is("Propose")');
  await p.waitForURL(/rules\/\d+$/);
  const own = p.url();
  const approve = p.locator('button:text-is("Approve")');
  expect(await approve.isDisabled(), "the author's Approve button is disabled");
  expect((await p.textContent("#approve-why")).includes("four eyes"), "the disabled button says why (four eyes)");
  const status = await p.evaluate(async () => {
    const csrf = document.querySelector('input[name=csrf]').value;
    const api = location.pathname.replace("/services/", "/api/v1/services/").replace("/rules/", "/versions/");
    const r = await fetch(api + "/approve", { method: "POST", headers: { "X-CSRF-Token": csrf, "Content-Type": "application/json" }, body: "{}" });
    return [r.status, (await r.json()).error];
  });
  expect(status[0] === 403 && status[1].includes("self-approval"), "the server refuses self-approval too: " + status[1]);
  await shot(p, "06-self-approval-refused");
  // Alice withdraws her proposal; the engine's one stays.
  await p.click('button:text-is("Withdraw")');
  await p.waitForSelector(".card .state-withdrawn");
  expect(p.url() === own && (await p.locator('button:text-is("Approve")').count()) === 0, "alice withdrew her proposal: no decision is left to take");

  // Bob approves the engine's recommendation.
  const bob = await session("bob");
  p = bob.page;
  await p.goto(base + "/services/checkout/rules/3");
  await p.fill("#comment", "evidence looks right");
  await p.click('button:text-is("Approve")');
  await p.waitForSelector(".badge-active");
  expect(p.url() === base + "/services/checkout/rules/3" && (await p.textContent("body")).includes("Approved by bob") &&
    (await p.textContent("body")).includes("evidence looks right"), "bob's approval (with his comment) makes v3 active");
  await shot(p, "07-approved");
  await p.goto(base + "/");
  const checkoutRow = '#overview-rows tr:has(a[href="/services/checkout"])';
  await p.waitForSelector(`${checkoutRow} a[href="/services/checkout/rules/3"]`);
  await p.waitForSelector(`${checkoutRow} >> text=SYNCED`);
  expect(true, "the overview shows v3 active on checkout with its rollout state");

  // Roll back to v2 with the diff preview.
  await p.goto(base + "/services/checkout/rules");
  await shot(p, "08-timeline");
  await p.click('a[href="/services/checkout/rollback/2"]');
  await p.waitForSelector("table.diff");
  expect((await p.textContent("table.diff")).includes("routes[api].rate_limit.rate"), "the rollback preview shows the diff");
  await shot(p, "09-rollback-preview");
  // Spaces get past the browser's "required" but not the server: nothing is rolled back.
  await p.fill("#reason", "   ");
  await p.check('input[name=confirm]');
  await p.click('button:text-is("Roll back to v2")');
  await p.waitForSelector(".banner-error");
  expect(/^reason: /.test((await p.textContent(".banner-error")).trim()) && (await p.textContent("body")).includes("The active version is v3"),
    "a rollback without a reason is refused, naming the field: " + (await p.textContent(".banner-error")).trim());
  await p.fill("#reason", "errors went up after v3");
  await p.check('input[name=confirm]');
  await p.click('button:text-is("Roll back to v2")');
  await p.waitForSelector("text=Rollback to the content of");
  const rolledBack = Number(p.url().match(/\/services\/checkout\/rules\/(\d+)$/)[1]);
  expect((await p.textContent("h1")).includes("active") && (await p.textContent(".card")).includes("Reason: errors went up after v3"),
    `the rollback to v2 is a new, active version (v${rolledBack}) that records its reason`);
  await shot(p, "10-rolled-back");

  // Otto (operator) acknowledges the P1 alert, on a phone.
  const otto = await session("otto", { width: 375, height: 812 });
  p = otto.page;
  await p.waitForSelector("#overview-rows");
  const widths = await p.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
  expect(widths[0] <= widths[1], `the overview does not scroll sideways on a 375 px phone (scrollWidth ${widths[0]}, innerWidth ${widths[1]})`);
  await shot(p, "11-overview-phone");
  // The test holds one P1 firing for the whole walk-through (payments-held);
  // the demo's own P1 comes and goes beside it.
  const held = "#alert-payments-held";
  await p.goto(base + "/alerts");
  await p.waitForSelector(held + " .tier-P1");
  expect((await p.textContent(held)).includes("open"), "the held P1 is firing and open");
  await shot(p, "12-alerts-firing");
  await p.click(held + ' button:text-is("Acknowledge")');
  await p.waitForSelector(held + " >> text=acknowledged by otto");
  expect((await p.locator(held + ' button:text-is("Acknowledge")').count()) === 0, "the P1 alert is acknowledged by otto, its button gone");
  await shot(p, "13-alerts-acknowledged");

  // The audit log: bob's approval and rollback, found with the page's own filter.
  await p.goto(base + "/audit");
  await p.click('a:text-is("Verify the whole chain now")');
  expect((await p.textContent(".banner-ok")).includes("Whole chain verified now"), "the whole audit chain verifies, walked on request");
  const auditRows = () => p.$$eval("table tbody tr", (trs) => trs.map((tr) => [...tr.querySelectorAll("td")].map((td) => td.textContent.trim())));
  await p.fill("#f-service", "checkout");
  await p.fill("#f-actor", "bob");
  await p.selectOption("#f-action", "rollback");
  await p.click('button:text-is("Filter")');
  await p.waitForURL(/\/audit\?.*action=rollback/);
  let rows = await auditRows();
  expect(rows.length === 1 && rows[0][2] === "bob" && rows[0][3] === "rollback" && rows[0][4] === "checkout" &&
    rows[0][5] === String(rolledBack) && rows[0][6].includes('"reason":"errors went up after v3"') && rows[0][6].includes('"rollback_of":2'),
    "the audit log records bob's rollback with its reason: " + JSON.stringify(rows));
  await shot(p, "14-audit");
  await p.selectOption("#f-action", "approve");
  await p.click('button:text-is("Filter")');
  await p.waitForURL(/\/audit\?.*action=approve/);
  rows = await auditRows();
  expect(rows.length === 1 && rows[0][2] === "bob" && rows[0][5] === "3" && rows[0][6].includes("evidence looks right"),
    "the audit log records bob's approval of v3 with his comment: " + JSON.stringify(rows));

  // Logging out ends the session everywhere: the overview open in another
  // tab is told so by its stream, and the pages ask for a login again.
  const tab = await otto.ctx.newPage();
  await tab.goto(base + "/");
  await tab.waitForSelector('#live[data-state="live"]');
  await p.click('button:text-is("Log out")');
  await p.waitForURL(/\/login/);
  await tab.waitForSelector('#live[data-state="down"]:has-text("session ended")');
  const ended = (await tab.textContent("#live")).trim();
  await p.goto(base + "/alerts");
  expect(ended.includes("session ended") && p.url().includes("/login"),
    `otto logs out: the open overview says "${ended}" and /alerts asks for a login again`);

  // Settings are for admins: alice (operator, approver) is refused.
  const settings = await alice.page.goto(base + "/settings");
  expect(settings.status() === 403 && (await alice.page.locator("#u-name").count()) === 0,
    `alice, not an admin, is refused the settings page (HTTP ${settings.status()})`);
  await shot(alice.page, "15-settings-forbidden");
  expect(cspViolations.length === 0, "no Content-Security-Policy violations: " + cspViolations.join(" | "));
  console.log("PASS");
} catch (e) {
  console.error(String(e && e.stack || e));
  process.exitCode = 1;
} finally {
  await browser.close();
}
