/**
 * The application side of the ticket-triage agent: its own tables (drizzle, in the schema
 * `triage_demo` of the same database as `ratchet`, so a commit is one transaction) and the
 * actions a sealed contract may apply. Actions receive the commit transaction: `tx.db` is
 * drizzle on it, every value is bound as a parameter — agent output never becomes SQL.
 */
import { z } from 'zod';
import { eq } from 'drizzle-orm';
import { integer, pgSchema, serial, text, timestamp, jsonb } from 'drizzle-orm/pg-core';
import { defineAction } from '@ratchet/sdk';

export const app = pgSchema('triage_demo');

export const users = app.table('users', {
  id: integer('id').primaryKey(),
  name: text('name').notNull(),
  lastTicketAt: timestamp('last_ticket_at', { withTimezone: true }),
});

export const tickets = app.table('tickets', {
  id: serial('id').primaryKey(),
  userId: integer('user_id').notNull(),
  priority: text('priority').notNull(),
  team: text('team').notNull(),
  summary: text('summary').notNull(),
  incident: text('incident'),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
});

/** Every call the stub model answers, from any process: the demo counts them. */
export const modelCalls = app.table('model_calls', {
  id: serial('id').primaryKey(),
  ticket: text('ticket').notNull(),
  answer: jsonb('answer'),
  pid: integer('pid').notNull(),
  at: timestamp('at', { withTimezone: true }).notNull().defaultNow(),
});

/** The app's own DDL (a real app would use its migrations). Dropped and recreated per demo run. */
export const APP_DDL = `
  DROP SCHEMA IF EXISTS triage_demo CASCADE;
  CREATE SCHEMA triage_demo;
  CREATE TABLE triage_demo.users (id int PRIMARY KEY, name text NOT NULL, last_ticket_at timestamptz);
  CREATE TABLE triage_demo.tickets (id serial PRIMARY KEY, user_id int NOT NULL, priority text NOT NULL, team text NOT NULL,
                                    summary text NOT NULL, incident text, created_at timestamptz NOT NULL DEFAULT now());
  CREATE TABLE triage_demo.model_calls (id serial PRIMARY KEY, ticket text NOT NULL, answer jsonb, pid int NOT NULL,
                                        at timestamptz NOT NULL DEFAULT clock_timestamp());`;

export const insertTicket = defineAction({
  name: 'tickets.insert',
  input: z.object({
    userId: z.number().int(),
    priority: z.enum(['high', 'medium', 'low']),
    team: z.string().min(1),
    summary: z.string(),
    incident: z.string().optional(),
  }),
  run: async (tx, input) => {
    const [row] = await tx.db.insert(tickets).values({ ...input, incident: input.incident ?? null }).returning({ id: tickets.id });
    await tx.emit('ticket.created', { ticketId: row!.id, team: input.team, priority: input.priority }, { key: String(row!.id) });
    return { ticketId: row!.id };
  },
});

export const touchUser = defineAction({
  name: 'users.touch',
  input: z.object({ id: z.number().int(), at: z.coerce.date() }),
  run: async (tx, { id, at }) => {
    await tx.db.update(users).set({ lastTicketAt: at }).where(eq(users.id, id));
    return null;
  },
});
