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
    expect((await page.textContent(".banner-error")).includes("Wrong user name or password"), "a wrong password is refused");
    await ctx.close();
  }

  // Alice: the overview updates live during the incident.
  const alice = await session("alice");
  let p = alice.page;
  await p.waitForSelector('#live[data-state="live"]');
  expect(true, "the overview stream is live");
  await p.waitForSelector('#overview-rows >> text=overloaded', { timeout: 30000 });
  expect(true, "the incident shows up live (checkout overloaded)");
  await shot(p, "02-overview-incident");

  await p.click('a[href="/services/checkout"]');
  await p.waitForSelector("svg.chart");
  expect((await p.textContent("body")).includes("Why the score is what it is"), "the service page explains the score");
  await shot(p, "03-service");

  // The engine's recommendation with its evidence.
  await p.click('nav >> text=Recommendations');
  await p.waitForSelector("text=load score 0.91 above 0.80");
  await p.click("details summary");
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
  await p.waitForSelector("text=withdrawn");

  // Bob approves the engine's recommendation.
  const bob = await session("bob");
  p = bob.page;
  await p.goto(base + "/services/checkout/rules/3");
  await p.fill("#comment", "evidence looks right");
  await p.click('button:text-is("Approve")');
  await p.waitForSelector(".badge-active");
  expect((await p.textContent("body")).includes("Approved by bob"), "bob's approval makes v3 active");
  await shot(p, "07-approved");
  await p.goto(base + "/");
  await p.waitForSelector('#overview-rows >> text=v3');
  expect((await p.textContent("#overview-rows")).includes("SYNCED"), "the overview shows the rollout state");

  // Roll back to v2 with the diff preview.
  await p.goto(base + "/services/checkout/rules");
  await shot(p, "08-timeline");
  await p.click('a[href="/services/checkout/rollback/2"]');
  await p.waitForSelector("table.diff");
  expect((await p.textContent("table.diff")).includes("routes[api].rate_limit.rate"), "the rollback preview shows the diff");
  await shot(p, "09-rollback-preview");
  await p.fill("#reason", "errors went up after v3");
  await p.check('input[name=confirm]');
  await p.click('button:text-is("Roll back to v2")');
  await p.waitForSelector("text=Rollback to the content of");
  expect((await p.textContent("h1")).includes("active"), "the rollback to v2 is a new, active version");
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
  await p.waitForURL(base + "/alerts");
  await p.waitForSelector(held + " >> text=acknowledged by otto");
  expect(true, "the P1 alert is acknowledged");
  await shot(p, "13-alerts-acknowledged");

  await p.goto(base + "/audit");
  expect((await p.textContent(".banner-ok")).includes("Chain verified"), "the audit chain verifies");
  await shot(p, "14-audit");

  await alice.page.goto(base + "/settings");
  await shot(alice.page, "15-settings-forbidden");
  expect(cspViolations.length === 0, "no Content-Security-Policy violations: " + cspViolations.join(" | "));
  console.log("PASS");
} catch (e) {
  console.error(String(e && e.stack || e));
  process.exitCode = 1;
} finally {
  await browser.close();
}
