import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;
import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.ConfigOptions;
import org.apache.flink.configuration.ReadableConfig;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.connector.datagen.source.GeneratorFunction;
import org.apache.flink.table.connector.ChangelogMode;
import org.apache.flink.table.connector.source.DynamicTableSource;
import org.apache.flink.table.connector.source.LookupTableSource;
import org.apache.flink.table.connector.source.ScanTableSource;
import org.apache.flink.table.connector.source.SourceProvider;
import org.apache.flink.table.connector.source.lookup.LookupFunctionProvider;
import org.apache.flink.table.data.GenericRowData;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.data.StringData;
import org.apache.flink.table.factories.DynamicTableSourceFactory;
import org.apache.flink.table.factories.FactoryUtil;
import org.apache.flink.table.functions.LookupFunction;
import org.apache.flink.types.RowKind;

/**
 * The sources of SqlOpsJob ('connector' = 'flinkstate-gen'), on the FLIP-27 DataGeneratorSource (its state is a split's
 * range, not the remaining sequence the datagen connector's sequence keeps). 'mode' = 'insert': an insert-only table
 * (id BIGINT) of id = 0, 1, 2, ... at 'rate' rows/s. 'mode' = 'upsert': a primary-keyed changelog, what a CDC or
 * upsert-kafka table is to a SQL job: an upsert stream (no UPDATE_BEFORE) over the schema (pk BIGINT NOT NULL, name
 * STRING, k STRING, id BIGINT, PRIMARY KEY (pk)). Record i < 'rows' is pk = i % 5, name = 'n' || i, k = 'k' || i % 4, id = i, an INSERT the
 * first time its pk comes and an UPDATE_AFTER after; record 17 deletes pk 2 (inserted again by record 22). Records from
 * 'rows' on delete pk -1, which never existed, so the job keeps running while its state stays as the data rows left
 * it. A lookup by pk (a lookup join's dimension table) finds pk in 0..4 as (pk, 'n' || pk, 'k' || pk % 4, pk),
 * synchronously or ('async' = 'true') as an async lookup.
 */
public class GenSourceFactory implements DynamicTableSourceFactory {

    static final ConfigOption<Long> ROWS = ConfigOptions.key("rows").longType().defaultValue(60L);
    static final ConfigOption<Integer> RATE = ConfigOptions.key("rate").intType().defaultValue(100);
    static final ConfigOption<String> MODE = ConfigOptions.key("mode").stringType().defaultValue("upsert");
    static final ConfigOption<Boolean> ASYNC = ConfigOptions.key("async").booleanType().defaultValue(false);

    @Override
    public String factoryIdentifier() {
        return "flinkstate-gen";
    }

    @Override
    public Set<ConfigOption<?>> requiredOptions() {
        return Collections.emptySet();
    }

    @Override
    public Set<ConfigOption<?>> optionalOptions() {
        Set<ConfigOption<?>> out = new HashSet<>();
        out.add(ROWS);
        out.add(RATE);
        out.add(MODE);
        out.add(ASYNC);
        return out;
    }

    @Override
    public DynamicTableSource createDynamicTableSource(Context context) {
        FactoryUtil.TableFactoryHelper helper = FactoryUtil.createTableFactoryHelper(this, context);
        helper.validate();
        ReadableConfig options = helper.getOptions();
        return new Source(options.get(ROWS), options.get(RATE), options.get(MODE).equals("upsert"), options.get(ASYNC));
    }

    static RowData row(RowKind kind, long pk, long id) {
        return GenericRowData.ofKind(kind, pk, StringData.fromString("n" + id), StringData.fromString("k" + (id % 4)), id);
    }

    /** Record i of the table (see the class comment). */
    public static final class Gen implements GeneratorFunction<Long, RowData> {
        final long rows;
        final boolean upsert;

        public Gen(long rows, boolean upsert) {
            this.rows = rows;
            this.upsert = upsert;
        }

        @Override
        public RowData map(Long i) {
            if (!upsert) return GenericRowData.of(i);
            if (i >= rows) return row(RowKind.DELETE, -1, i);
            if (i == 17) return row(RowKind.DELETE, 2, i);
            boolean first = i < 5 || i == 22;
            return row(first ? RowKind.INSERT : RowKind.UPDATE_AFTER, i % 5, i);
        }
    }

    static Collection<RowData> find(RowData key) {
        long pk = key.getLong(0);
        if (pk < 0 || pk > 4) return Collections.emptyList();
        List<RowData> out = new ArrayList<>();
        out.add(row(RowKind.INSERT, pk, pk));
        return out;
    }

    public static final class Lookup extends LookupFunction {
        @Override
        public Collection<RowData> lookup(RowData key) {
            return find(key);
        }
    }

    /** The same lookup answered asynchronously (an async lookup join keeps its in-flight rows as operator state). */
    public static final class AsyncLookup extends org.apache.flink.table.functions.AsyncLookupFunction {
        @Override
        public java.util.concurrent.CompletableFuture<Collection<RowData>> asyncLookup(RowData key) {
            return java.util.concurrent.CompletableFuture.completedFuture(find(key));
        }
    }

    static final class Source implements ScanTableSource, LookupTableSource {
        final long rows;
        final int rate;
        final boolean upsert;
        final boolean async;

        Source(long rows, int rate, boolean upsert, boolean async) {
            this.rows = rows;
            this.rate = rate;
            this.upsert = upsert;
            this.async = async;
        }

        @Override
        public ChangelogMode getChangelogMode() {
            return upsert ? ChangelogMode.upsert() : ChangelogMode.insertOnly();
        }

        @Override
        @SuppressWarnings("unchecked")
        public ScanRuntimeProvider getScanRuntimeProvider(ScanContext context) {
            TypeInformation<RowData> type = (TypeInformation<RowData>) (TypeInformation<?>) context.createTypeInformation(!upsert
                    ? org.apache.flink.table.api.DataTypes.ROW(org.apache.flink.table.api.DataTypes.FIELD("id", org.apache.flink.table.api.DataTypes.BIGINT()))
                    : org.apache.flink.table.api.DataTypes.ROW(
                            org.apache.flink.table.api.DataTypes.FIELD("pk", org.apache.flink.table.api.DataTypes.BIGINT().notNull()),
                            org.apache.flink.table.api.DataTypes.FIELD("name", org.apache.flink.table.api.DataTypes.STRING()),
                            org.apache.flink.table.api.DataTypes.FIELD("k", org.apache.flink.table.api.DataTypes.STRING()),
                            org.apache.flink.table.api.DataTypes.FIELD("id", org.apache.flink.table.api.DataTypes.BIGINT())));
            return SourceProvider.of(new DataGeneratorSource<>(new Gen(rows, upsert), Long.MAX_VALUE, RateLimiterStrategy.perSecond(rate), type), 1);
        }

        @Override
        public LookupRuntimeProvider getLookupRuntimeProvider(LookupContext context) {
            if (async) return org.apache.flink.table.connector.source.lookup.AsyncLookupFunctionProvider.of(new AsyncLookup());
            return LookupFunctionProvider.of(new Lookup());
        }

        @Override
        public DynamicTableSource copy() {
            return new Source(rows, rate, upsert, async);
        }

        @Override
        public String asSummaryString() {
            return upsert ? "flinkstate-gen upsert" : "flinkstate-gen insert";
        }
    }
}
