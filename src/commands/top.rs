//! `sysdiet top`: the host's windows, live on a terminal (ratatui), or
//! printed one after another (a table, or JSON) for scripts.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph, Row, Table, TableState, Wrap};
use ratatui::{DefaultTerminal, Frame};
use sysdiet::pipeline::{Host, HostWindow};
use sysdiet::report::export::{Document, Exporter, JsonExporter, TextExporter};
use sysdiet::report::top::{cells, rows, summary, SortBy, TopRow, HEADER};
use sysdiet::Result;

pub fn top(host: Host, interval: Duration, iterations: Option<u64>, json: bool) -> Result<i32> {
    if iterations.is_some() || json || !std::io::stdout().is_terminal() {
        return batch(host, interval, iterations, json);
    }
    let mut terminal = ratatui::init();
    let result = live(&mut terminal, host, interval);
    ratatui::restore();
    result
}

/// Windows printed one after another until `iterations` (or forever).
/// Ctrl-C (or SIGTERM) ends the window under way early: it is printed,
/// and the status is 128 + the signal.
fn batch(mut host: Host, interval: Duration, iterations: Option<u64>, json: bool) -> Result<i32> {
    let stop = Arc::new(AtomicUsize::new(0));
    // A thread of its own waits for the signals and wakes the loop, which
    // otherwise sleeps until its next window.
    let mut signals = signal_hook::iterator::Signals::new([signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM])?;
    let (said, main) = (Arc::clone(&stop), std::thread::current());
    std::thread::spawn(move || {
        for sig in signals.forever() {
            said.store(sig as usize, Ordering::Relaxed);
            main.unpark();
        }
    });
    let mut out = std::io::stdout().lock();
    eprintln!("sysdiet top: counting every task's syscalls, a window every {}", sysdiet::human::duration(interval.as_nanos() as u64));
    let mut next = Instant::now() + interval;
    for i in 0.. {
        if iterations.is_some_and(|n| i >= n) {
            break;
        }
        while stop.load(Ordering::Relaxed) == 0 && Instant::now() < next {
            std::thread::park_timeout(next.saturating_duration_since(Instant::now()));
        }
        next += interval;
        let w = host.window()?;
        let doc = Document::Window { window: &w.window, findings: &w.findings };
        let bytes = if json { JsonExporter.serialize(&doc)? } else { TextExporter { per_thread: false }.serialize(&doc)? };
        out.write_all(&bytes)?;
        if !json {
            out.write_all(b"\n")?;
        }
        out.flush()?;
        if stop.load(Ordering::Relaxed) != 0 {
            return Ok(128 + stop.load(Ordering::Relaxed) as i32);
        }
    }
    Ok(0)
}

/// What the screen shows, and what the keys change.
struct Screen {
    window: Option<HostWindow>,
    sort: SortBy,
    filter: String,
    /// Typing a filter: keys go to it until Enter or Esc.
    editing: bool,
    paused: bool,
    table: TableState,
}

fn live(terminal: &mut DefaultTerminal, mut host: Host, interval: Duration) -> Result<i32> {
    let mut s = Screen { window: None, sort: SortBy::default(), filter: String::new(), editing: false, paused: false, table: TableState::default() };
    let mut next = Instant::now() + interval;
    loop {
        terminal.draw(|f| draw(f, &mut s))?;
        let wait = next.saturating_duration_since(Instant::now());
        if event::poll(wait)? {
            if let Event::Key(k) = event::read()? {
                if k.kind == KeyEventKind::Press && !key(&mut s, k.code, k.modifiers) {
                    return Ok(0);
                }
            }
            continue;
        }
        next += interval;
        // Paused: windows are still read (so the next one is not the sum
        // of the pause), only not shown.
        let w = host.window()?;
        if !s.paused {
            s.window = Some(w);
        }
    }
}

/// Applies a key; false to quit.
fn key(s: &mut Screen, code: KeyCode, mods: KeyModifiers) -> bool {
    if mods.contains(KeyModifiers::CONTROL) && code == KeyCode::Char('c') {
        return false;
    }
    if s.editing {
        match code {
            KeyCode::Enter => s.editing = false,
            KeyCode::Esc => {
                s.editing = false;
                s.filter.clear();
            }
            KeyCode::Backspace => {
                s.filter.pop();
            }
            KeyCode::Char(c) => s.filter.push(c),
            _ => {}
        }
        return true;
    }
    match code {
        KeyCode::Char('q') | KeyCode::F(10) => return false,
        KeyCode::Char('s') | KeyCode::F(6) => s.sort = s.sort.next(),
        KeyCode::Char('/') | KeyCode::F(4) => s.editing = true,
        KeyCode::Esc => s.filter.clear(),
        KeyCode::Char(' ') | KeyCode::Char('p') => s.paused = !s.paused,
        KeyCode::Down | KeyCode::Char('j') => s.table.select_next(),
        KeyCode::Up | KeyCode::Char('k') => s.table.select_previous(),
        _ => {}
    }
    true
}

fn draw(f: &mut Frame, s: &mut Screen) {
    let [head, body, detail, help] =
        Layout::vertical([Constraint::Length(1), Constraint::Min(5), Constraint::Length(8), Constraint::Length(1)]).areas(f.area());
    let Some(w) = &s.window else {
        f.render_widget(Paragraph::new("sysdiet top: counting every syscall on the host; the first window comes in a moment..."), head);
        f.render_widget(Paragraph::new(help_line(s)), help);
        return;
    };
    let shown: Vec<TopRow> = rows(&w.window, &w.findings, s.sort, &s.filter);
    let paused = if s.paused { "  [paused]" } else { "" };
    f.render_widget(Paragraph::new(format!("{}{paused}", summary(&w.window, shown.len()))), head);

    let widths = [
        Constraint::Length(18),
        Constraint::Length(16),
        Constraint::Length(EXE_WIDTH as u16),
        Constraint::Length(6),
        Constraint::Length(8),
        Constraint::Length(7),
        Constraint::Length(7),
        Constraint::Min(20),
    ];
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let table = Table::new(
        shown.iter().map(|r| {
            let mut c = cells(r, &w.findings);
            c[2] = tail(std::mem::take(&mut c[2]), EXE_WIDTH);
            Row::new(c)
        }),
        widths,
    )
    .header(Row::new(HEADER).style(bold))
    .row_highlight_style(Style::default().add_modifier(Modifier::REVERSED))
    .block(Block::default().borders(Borders::TOP).title(format!(" sorted by {} ", s.sort.label())));
    f.render_stateful_widget(table, body, &mut s.table);

    let selected = s.table.selected().and_then(|i| shown.get(i)).or(shown.first());
    f.render_widget(
        Paragraph::new(details(w, selected)).wrap(Wrap { trim: false }).block(Block::default().borders(Borders::TOP).title(" findings ")),
        detail,
    );
    f.render_widget(Paragraph::new(help_line(s)), help);
}

/// The width of the executable column: a longer path shows its end.
const EXE_WIDTH: usize = 24;

/// The last `width` characters of a cell, "…" first when cut: a path's
/// file name is what tells two programs apart.
fn tail(cell: String, width: usize) -> String {
    let n = cell.chars().count();
    if n <= width {
        return cell;
    }
    let kept: String = cell.chars().skip(n - (width - 1)).collect();
    format!("…{kept}")
}

/// The selected row's findings: what, and the first fix.
fn details(w: &HostWindow, row: Option<&TopRow>) -> Vec<Line<'static>> {
    let Some(row) = row else { return vec![Line::from("no program made syscalls in this window")] };
    let exe = row.executable.as_deref().map(|e| format!(", {e}")).unwrap_or_default();
    if row.findings.is_empty() {
        return vec![Line::from(format!("{} ({}{exe}): nothing to fix in this window", row.program, row.unit))];
    }
    let mut lines = vec![Line::from(format!("{} ({}{exe}):", row.program, row.unit))];
    for f in row.findings.iter().map(|&i| &w.findings[i]) {
        // Rules quote what came from the target in `what` and `fixes`.
        lines.push(Line::from(format!("[{}] {}", f.id, f.what)));
        if let Some(fix) = f.fixes.first() {
            lines.push(Line::from(format!("    fix: {}", fix.text)));
        }
    }
    lines
}

fn help_line(s: &Screen) -> String {
    if s.editing {
        return format!("filter: {}_   (Enter: keep, Esc: clear)", s.filter);
    }
    let filter = if s.filter.is_empty() { String::new() } else { format!("  filter: {}", s.filter) };
    format!("q quit  s sort  / filter  space pause  ↑↓ select{filter}")
}
